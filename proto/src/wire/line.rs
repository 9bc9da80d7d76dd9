//! A line written straight from its parameters, without a [`Message`]:
//! for the messages agents send each other by the hundred thousand a
//! second. [`Params`] is what both can be given: a [`Message`] takes a copy
//! of each value, a [`Line`] borrows it until it is written.

use super::Message;
use super::encode::encode_value;
use super::message::decimal_bytes;

/// Where a message's parameters go: names are the protocol's own.
pub(crate) trait Params<'a> {
    /// A parameter whose value is bytes.
    fn text(&mut self, name: &'static str, value: &'a [u8]);
    /// A parameter whose value is a number.
    fn num(&mut self, name: &'static str, value: u64);
}

impl<'a> Params<'a> for Message {
    fn text(&mut self, name: &'static str, value: &'a [u8]) {
        self.set(name, value);
    }

    fn num(&mut self, name: &'static str, value: u64) {
        self.set_u64(name, value);
    }
}

/// The most parameters a [`Line`] takes: more than any message written
/// with one has (a `LOCK` to an owner, the most, has ten).
pub(crate) const LINE_PARAMS: usize = 12;

#[derive(Clone, Copy)]
enum Value<'a> {
    Text(&'a [u8]),
    Num(u64),
}

/// A line being built: written as [`encode`](super::encode()) writes the
/// [`Message`] with the same command and parameters (sorted by name, a
/// name given twice keeping its last value).
pub(crate) struct Line<'a> {
    command: &'static str,
    /// Each name with its first eight bytes as a number ([`prefix`]).
    params: [(u64, &'static str, Value<'a>); LINE_PARAMS],
    len: usize,
}

/// The first eight bytes of `name`, big-endian, zero-padded: two names
/// compare as their prefixes do whenever these differ (a name holds no
/// zero byte), so sorting compares numbers, not strings.
fn prefix(name: &str) -> u64 {
    let mut bytes = [0u8; 8];
    let n = name.len().min(8);
    bytes[..n].copy_from_slice(&name.as_bytes()[..n]);
    u64::from_be_bytes(bytes)
}

impl<'a> Line<'a> {
    /// A line with `command` and no parameter yet.
    pub fn new(command: &'static str) -> Line<'a> {
        Line {
            command,
            params: [(0, "", Value::Num(0)); LINE_PARAMS],
            len: 0,
        }
    }

    fn put(&mut self, name: &'static str, value: Value<'a>) {
        let key = prefix(name);
        if let Some(p) = (self.params[..self.len].iter_mut()).find(|p| p.0 == key && p.1 == name) {
            p.2 = value;
            return;
        }
        // Every message written with a line has a fixed set of parameters,
        // fewer than the room (the tests write each with all of them).
        debug_assert!(self.len < LINE_PARAMS, "{} parameters", self.len + 1);
        if let Some(p) = self.params.get_mut(self.len) {
            *p = (key, name, value);
            self.len += 1;
        }
    }

    /// The line, `\n` included.
    #[cfg(test)]
    pub fn finish(&mut self) -> Vec<u8> {
        self.finish_in(Vec::new())
    }

    /// The line, `\n` included, written in `out` (emptied first): a
    /// buffer used before keeps its room.
    pub fn finish_in(&mut self, mut out: Vec<u8>) -> Vec<u8> {
        out.clear();
        let params = &mut self.params[..self.len];
        let order =
            |a: &(u64, &str, _), b: &(u64, &str, _)| a.0.cmp(&b.0).then_with(|| a.1.cmp(b.1));
        // The writers of the messages of a grant give their parameters in
        // order: one pass finds it so.
        if !params.is_sorted_by(|a, b| order(a, b).is_le()) {
            params.sort_unstable_by(order);
        }
        let size = self.command.len()
            + params
                .iter()
                .map(|(_, n, v)| {
                    n.len()
                        + 2
                        + match v {
                            Value::Text(t) => t.len() + 2,
                            Value::Num(_) => 20,
                        }
                })
                .sum::<usize>()
            + 1;
        out.reserve(size);
        out.extend_from_slice(self.command.as_bytes());
        let mut digits = [0u8; 20];
        for (i, (_, name, value)) in params.iter().enumerate() {
            out.push(if i == 0 { b' ' } else { b';' });
            out.extend_from_slice(name.as_bytes());
            out.push(b'=');
            match value {
                Value::Text(t) => encode_value(t, &mut out),
                Value::Num(n) => out.extend_from_slice(decimal_bytes(*n, &mut digits)),
            }
        }
        out.push(b'\n');
        out
    }
}

impl<'a> Params<'a> for Line<'a> {
    fn text(&mut self, name: &'static str, value: &'a [u8]) {
        self.put(name, Value::Text(value));
    }

    fn num(&mut self, name: &'static str, value: u64) {
        self.put(name, Value::Num(value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::encode_to_vec;

    #[test]
    fn a_line_is_written_as_the_same_message_would_be() {
        let mut line = Line::new("LOCK");
        let mut m = Message::new("LOCK");
        let given: [(&'static str, Option<&[u8]>, u64); 7] = [
            ("req", None, 42),
            ("object_name", Some(b"a;b \"c\"\\d\n"), 0),
            ("zeta", Some(b"\"quoted"), 0),
            ("epoch", None, u64::MAX),
            ("a", Some(b""), 0),
            ("req", None, 7), // given twice: the last one wins
            ("key", Some(b"plain"), 0),
        ];
        // Names alike in their first eight bytes sort by the rest.
        for name in ["object_nb", "object_na", "object_n", "object_nameee"] {
            line.text(name, b"v");
            m.text(name, b"v");
        }
        for (name, text, num) in given {
            match text {
                Some(t) => {
                    line.text(name, t);
                    m.text(name, t);
                }
                None => {
                    line.num(name, num);
                    m.num(name, num);
                }
            }
        }
        let written = line.finish();
        assert_eq!(
            String::from_utf8_lossy(&written),
            String::from_utf8_lossy(&encode_to_vec(&m))
        );
        assert_eq!(crate::wire::parse_line(&written).expect("parses"), m);
        assert_eq!(m.get_str("req"), Some("7"));
    }

    #[test]
    fn a_line_written_in_a_used_buffer_is_the_same_line() {
        let write = |buf: Vec<u8>| {
            let mut line = Line::new("ADDTICKET");
            line.text("object_name", b"db/t/17");
            line.num("req", 42);
            line.num("epoch", 1_700_000_000_000);
            line.finish_in(buf)
        };
        let fresh = write(Vec::new());
        let mut used = b"LOCKPING serial=1\nleft over from before, longer than the line".to_vec();
        used.reserve(4096);
        let room = used.capacity();
        let again = write(used);
        assert_eq!(again, fresh);
        assert_eq!(again.capacity(), room, "the buffer's room is kept");
        assert_eq!(
            fresh,
            b"ADDTICKET epoch=1700000000000;object_name=db/t/17;req=42\n"
        );
    }

    #[test]
    fn a_line_without_parameters_is_its_command() {
        assert_eq!(Line::new("LOCKREADY").finish(), b"LOCKREADY\n");
    }
}
