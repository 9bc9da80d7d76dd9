//! The message: what one line of the snapcommunicator grammar carries.

use std::borrow::Cow;
use std::fmt;

/// Most parameters one message may carry. The protocol uses at most a dozen;
/// the cap keeps a hostile line from building an unbounded table.
pub const MAX_PARAMS: usize = 64;
/// Longest command, server, service or parameter name accepted.
pub const MAX_NAME_LEN: usize = 64;

/// One protocol message.
///
/// Line form (snaplock(7), GRAMMAR):
/// `[<sent_from_server:sent_from_service ][[server:]service/]COMMAND[ name=value;...]`.
///
/// Parameters are kept sorted by name, names unique (the last one given
/// wins, as in snapcommunicator), so the encoder writes them in the sorted
/// order the grammar fixes and two equal messages compare equal.
/// Values are bytes: an object name may carry anything the grammar can
/// escape, and it is echoed back exactly.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Message {
    /// `<server:service ` prefix: who sent it (empty when absent).
    pub sent_from_server: String,
    /// Service half of the sent-from prefix.
    pub sent_from_service: String,
    /// Destination server (`server:` part of the destination prefix).
    pub server: String,
    /// Destination service (`service/` part of the destination prefix).
    pub service: String,
    /// The UPPERCASE command.
    pub command: String,
    /// A name the protocol knows is borrowed, any other owned: most
    /// messages then allocate nothing for their names.
    params: Vec<(Cow<'static, str>, Vec<u8>)>,
}

impl Message {
    /// A message with `command` and no parameter.
    pub fn new(command: &str) -> Message {
        Message {
            command: command.to_owned(),
            // Room for what the protocol's messages carry, in one allocation.
            params: Vec::with_capacity(8),
            ..Message::default()
        }
    }

    /// Adds or replaces a parameter; returns `self` for chaining.
    pub fn with(mut self, name: &str, value: impl AsRef<[u8]>) -> Message {
        self.set(name, value);
        self
    }

    /// Adds or replaces a parameter.
    pub fn set(&mut self, name: &str, value: impl AsRef<[u8]>) {
        self.set_vec(name, value.as_ref().to_vec());
    }

    /// Adds or replaces a parameter, taking the value as it is (no copy).
    pub fn set_owned(&mut self, name: &str, value: Vec<u8>) {
        self.set_vec(name, value);
    }

    fn set_vec(&mut self, name: &str, value: Vec<u8>) {
        match self.params.binary_search_by(|(n, _)| (**n).cmp(name)) {
            Ok(i) => self.params[i].1 = value,
            Err(i) => {
                let name =
                    known_name(name).map_or_else(|| Cow::Owned(name.to_owned()), Cow::Borrowed);
                self.params.insert(i, (name, value))
            }
        }
    }

    /// Adds or replaces a parameter whose value is a number.
    pub fn set_u64(&mut self, name: &str, value: u64) {
        let mut digits = Vec::with_capacity(20);
        put_u64(&mut digits, value);
        self.set_vec(name, digits);
    }

    /// Adds or replaces a parameter whose value is a signed number.
    pub fn set_i64(&mut self, name: &str, value: i64) {
        let mut digits = Vec::with_capacity(20);
        if value < 0 {
            digits.push(b'-');
        }
        put_u64(&mut digits, value.unsigned_abs());
        self.set_vec(name, digits);
    }

    /// The raw value of a parameter.
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        // A message has a handful of parameters and a request asks for a
        // dozen: a scan that compares lengths first is cheaper than a
        // binary search comparing strings (names are unique, so the first
        // match is the one).
        self.params
            .iter()
            .find(|(n, _)| n.len() == name.len() && **n == *name)
            .map(|(_, v)| v.as_slice())
    }

    /// The value of a parameter when it is valid UTF-8.
    pub fn get_str(&self, name: &str) -> Option<&str> {
        self.get(name).and_then(|v| std::str::from_utf8(v).ok())
    }

    /// Removes a parameter, returning its value.
    pub fn remove(&mut self, name: &str) -> Option<Vec<u8>> {
        match self.params.binary_search_by(|(n, _)| (**n).cmp(name)) {
            Ok(i) => Some(self.params.remove(i).1),
            Err(_) => None,
        }
    }

    /// The parameters, sorted by name.
    pub fn params(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.params.iter().map(|(n, v)| (&**n, v.as_slice()))
    }

    /// Number of parameters.
    pub fn param_count(&self) -> usize {
        self.params.len()
    }
}

impl fmt::Debug for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&String::from_utf8_lossy(&super::encode_to_vec(self)))
    }
}

impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// The parameter names of snaplock(7) and of the peer messages, as
/// `'static` strings: a message keeps these without allocating. Any other
/// valid name is kept as well, in its own allocation.
fn known_name(name: &str) -> Option<&'static str> {
    Some(match name {
        "object_name" => "object_name",
        "tag" => "tag",
        "pid" => "pid",
        "key" => "key",
        "duration" => "duration",
        "timeout" => "timeout",
        "timeout_date" => "timeout_date",
        "fence" => "fence",
        "error" => "error",
        "description" => "description",
        "mode" => "mode",
        "limit" => "limit",
        "policy" => "policy",
        "quiet" => "quiet",
        "owner" => "owner",
        "detach" => "detach",
        "progress" => "progress",
        "min_uptime" => "min_uptime",
        "min_trust" => "min_trust",
        "unlock_duration" => "unlock_duration",
        "namespace" => "namespace",
        "message" => "message",
        "reason" => "reason",
        "command" => "command",
        _ => return None,
    })
}

/// Whether `name` is a valid parameter, server or service name:
/// `[A-Za-z0-9_]+`, not starting with a digit, at most [`MAX_NAME_LEN`].
pub fn is_valid_name(name: &[u8]) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && !name[0].is_ascii_digit()
        && name.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Whether `name` is a valid command: a valid name in UPPERCASE.
pub fn is_valid_command(name: &[u8]) -> bool {
    is_valid_name(name) && !name.iter().any(u8::is_ascii_lowercase)
}

/// Appends `v` in decimal, without the formatting machinery (numbers are
/// written by the million in a handover).
pub(crate) fn put_u64(out: &mut Vec<u8>, v: u64) {
    let mut digits = [0u8; 20];
    out.extend_from_slice(decimal(v, &mut digits).as_bytes());
}

/// `v` in decimal, written at the end of `digits`: the digits' slice.
pub(crate) fn decimal(mut v: u64, digits: &mut [u8; 20]) -> &str {
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    std::str::from_utf8(&digits[at..]).unwrap_or_default()
}
