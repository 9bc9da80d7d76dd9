//! The replies of snaplock(7), REQUESTS, built in one place.

use crate::time::{UnixTime, WIRE_LEN};
use crate::wire::{Line, Message, Params, decimal_bytes};

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

/// [`locked`] written as its line in `buf` (emptied first, its room
/// kept): the same bytes as the message encoded, without building it.
pub fn locked_line(
    buf: Vec<u8>,
    object: &[u8],
    key: &str,
    timeout_date: UnixTime,
    fence: u64,
    tag: Option<i64>,
) -> Vec<u8> {
    let mut date = [0; WIRE_LEN];
    let mut digits = [0; 21];
    let mut line = Line::new("LOCKED");
    line.text("object_name", object);
    line.text("key", key.as_bytes());
    line.text("timeout_date", timeout_date.to_wire_in(&mut date));
    line.num("fence", fence);
    put_tag(&mut line, tag, &mut digits);
    line.finish_in(buf)
}

/// [`unlocked`] without an error, written as its line in `buf` (emptied
/// first, its room kept).
pub fn unlocked_line(buf: Vec<u8>, object: &[u8], tag: Option<i64>) -> Vec<u8> {
    let mut digits = [0; 21];
    let mut line = Line::new("UNLOCKED");
    line.text("object_name", object);
    put_tag(&mut line, tag, &mut digits);
    line.finish_in(buf)
}

/// `tag=`, as [`Message::set_i64`] writes it.
fn put_tag<'a>(line: &mut Line<'a>, tag: Option<i64>, digits: &'a mut [u8; 21]) {
    let Some(tag) = tag else { return };
    if tag >= 0 {
        line.num("tag", tag.unsigned_abs());
        return;
    }
    let mut abs = [0; 20];
    let abs = decimal_bytes(tag.unsigned_abs(), &mut abs);
    digits[0] = b'-';
    digits[1..=abs.len()].copy_from_slice(abs);
    line.text("tag", &digits[..=abs.len()]);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::encode_to_vec;

    const OBJECTS: [&[u8]; 5] = [
        b"db/t/17",
        b"a;b \"c\"\\d\n",
        b"\"quoted",
        b"name with spaces",
        b"x",
    ];
    const TAGS: [Option<i64>; 6] = [
        None,
        Some(0),
        Some(7),
        Some(-1),
        Some(i64::MIN),
        Some(i64::MAX),
    ];
    const DATES: [u64; 5] = [
        0,
        1_700_000_005_000_000,
        1_700_000_005_250_000,
        1_700_000_005_000_001,
        u64::MAX,
    ];

    #[test]
    fn a_locked_line_is_the_locked_message_encoded() {
        let mut buf = b"left over from a line before".to_vec();
        for object in OBJECTS {
            for tag in TAGS {
                for date in DATES {
                    for fence in [0, 42, u64::MAX] {
                        let date = UnixTime(date);
                        let msg = locked(object, "a1/4242", date, fence, tag);
                        buf = locked_line(buf, object, "a1/4242", date, fence, tag);
                        assert_eq!(
                            String::from_utf8_lossy(&buf),
                            String::from_utf8_lossy(&encode_to_vec(&msg))
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn an_unlocked_line_is_the_unlocked_message_encoded() {
        let mut buf = Vec::new();
        for object in OBJECTS {
            for tag in TAGS {
                buf = unlocked_line(buf, object, tag);
                assert_eq!(buf, encode_to_vec(&unlocked(object, tag, None)));
            }
        }
    }
}
