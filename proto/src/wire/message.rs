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
///
/// The values live back to back in one buffer and a parameter is its name
/// and a range of it: a message costs one allocation for its values and one
/// for its table, however many parameters it has (agents exchange them by
/// the hundred thousand a second).
#[derive(Clone, Default)]
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
    pub command: Command,
    /// Sorted by name. A name the protocol knows is borrowed, any other
    /// owned: most messages then allocate nothing for their names.
    params: Vec<Param>,
    /// The values, each at its parameter's range. A replaced or removed
    /// value leaves its bytes behind until the message is dropped: a
    /// message is built once and read once, so that is bounded by what
    /// was written to it.
    values: Vec<u8>,
}

#[derive(Clone)]
struct Param {
    name: Cow<'static, str>,
    /// Its place in [`KNOWN`], or [`UNKNOWN`].
    rank: u16,
    start: usize,
    end: usize,
}

/// The rank of a name not in [`KNOWN`].
const UNKNOWN: u16 = u16::MAX;

impl Param {
    /// How this parameter's name sorts against `name` (of rank `rank`).
    fn order(&self, name: &str, rank: u16) -> std::cmp::Ordering {
        if self.rank != UNKNOWN && rank != UNKNOWN {
            self.rank.cmp(&rank)
        } else {
            (*self.name).cmp(name)
        }
    }
}

/// Room for the values of the protocol's messages, in one allocation.
const VALUES_ROOM: usize = 96;

impl Message {
    /// A message with `command` and no parameter.
    pub fn new(command: &str) -> Message {
        Message {
            command: Command::from(command),
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
        let value = value.as_ref();
        let start = self.start_value(value.len());
        self.values.extend_from_slice(value);
        self.end_value(name, start);
    }

    /// Adds or replaces a parameter from an owned value (copied into the
    /// message's buffer, as any other).
    pub fn set_owned(&mut self, name: &str, value: Vec<u8>) {
        self.set(name, value);
    }

    /// Adds or replaces a parameter whose value is a number.
    pub fn set_u64(&mut self, name: &str, value: u64) {
        let mut digits = [0u8; 20];
        self.set(name, decimal_bytes(value, &mut digits));
    }

    /// Adds or replaces a parameter whose value is a signed number.
    pub fn set_i64(&mut self, name: &str, value: i64) {
        let mut digits = [0u8; 20];
        let abs = decimal_bytes(value.unsigned_abs(), &mut digits);
        let start = self.start_value(abs.len() + 1);
        if value < 0 {
            self.values.push(b'-');
        }
        self.values.extend_from_slice(abs);
        self.end_value(name, start);
    }

    /// Where the next value starts, with room for `len` more bytes.
    pub(super) fn start_value(&mut self, len: usize) -> usize {
        if self.values.capacity() == 0 {
            self.values.reserve(len.max(VALUES_ROOM));
        }
        self.values.len()
    }

    /// The bytes written since `start` are the value of `name`.
    pub(super) fn end_value(&mut self, name: &str, start: usize) {
        self.end_value_known(name, None, start);
    }

    /// [`end_value`](Self::end_value), with the name's place in [`KNOWN`]
    /// when the caller already looked it up.
    pub(super) fn end_value_known(&mut self, name: &str, known: Option<u16>, start: usize) {
        let end = self.values.len();
        let rank = known
            .or_else(|| known_name(name.as_bytes()))
            .unwrap_or(UNKNOWN);
        // Parameters mostly come in order (the encoder writes them so, and
        // a parser reads them so): appended without a search.
        let at = match self.params.last() {
            None => Err(0),
            Some(last) if last.order(name, rank).is_lt() => Err(self.params.len()),
            Some(_) => self.params.binary_search_by(|p| p.order(name, rank)),
        };
        match at {
            Ok(i) => (self.params[i].start, self.params[i].end) = (start, end),
            Err(i) => {
                let name = match KNOWN.get(usize::from(rank)) {
                    Some(known) => Cow::Borrowed(*known),
                    None => Cow::Owned(name.to_owned()),
                };
                let param = Param {
                    name,
                    rank,
                    start,
                    end,
                };
                self.params.insert(i, param)
            }
        }
    }

    /// Reserves room for `len` more value bytes (a parser knows its line).
    pub(super) fn reserve_values(&mut self, len: usize) {
        self.values.reserve(len);
    }

    /// Appends to the value being written (between `start_value` and
    /// `end_value`).
    pub(super) fn value_bytes(&mut self) -> &mut Vec<u8> {
        &mut self.values
    }

    fn value(&self, p: &Param) -> &[u8] {
        &self.values[p.start..p.end]
    }

    /// The raw value of a parameter.
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        // A message has a handful of parameters and a request asks for a
        // dozen: a scan that compares lengths first is cheaper than a
        // binary search comparing strings (names are unique, so the first
        // match is the one).
        self.params
            .iter()
            .find(|p| p.name.len() == name.len() && *p.name == *name)
            .map(|p| self.value(p))
    }

    /// The value of a parameter when it is valid UTF-8.
    pub fn get_str(&self, name: &str) -> Option<&str> {
        self.get(name).and_then(|v| std::str::from_utf8(v).ok())
    }

    /// Removes a parameter, returning its value.
    pub fn remove(&mut self, name: &str) -> Option<Vec<u8>> {
        let i = self
            .params
            .iter()
            .position(|p| p.name.len() == name.len() && *p.name == *name)?;
        let p = self.params.remove(i);
        Some(self.value(&p).to_vec())
    }

    /// The parameters, sorted by name.
    pub fn params(&self) -> impl Iterator<Item = (&str, &[u8])> {
        self.params.iter().map(|p| (&*p.name, self.value(p)))
    }

    /// Number of parameters.
    pub fn param_count(&self) -> usize {
        self.params.len()
    }
}

impl PartialEq for Message {
    fn eq(&self, other: &Message) -> bool {
        self.sent_from_server == other.sent_from_server
            && self.sent_from_service == other.sent_from_service
            && self.server == other.server
            && self.service == other.service
            && self.command == other.command
            && self.params.len() == other.params.len()
            && self.params().eq(other.params())
    }
}

impl Eq for Message {}

/// A message's command: the protocol's own are borrowed, any other is
/// owned (every message has one, and most are the protocol's).
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Command(Cow<'static, str>);

impl Command {
    /// The command as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&str> for Command {
    fn from(command: &str) -> Command {
        Command(
            known_command(command.as_bytes())
                .map_or_else(|| Cow::Owned(command.to_owned()), Cow::Borrowed),
        )
    }
}

impl std::ops::Deref for Command {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<[u8]> for Command {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

impl PartialEq<str> for Command {
    fn eq(&self, other: &str) -> bool {
        *self.0 == *other
    }
}

impl PartialEq<&str> for Command {
    fn eq(&self, other: &&str) -> bool {
        *self.0 == **other
    }
}

impl fmt::Debug for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The commands agents send each other and their clients most, as
/// `'static` strings.
fn known_command(command: &[u8]) -> Option<&'static str> {
    Some(match command {
        b"LOCK" => "LOCK",
        b"LOCKED" => "LOCKED",
        b"UNLOCK" => "UNLOCK",
        b"UNLOCKED" => "UNLOCKED",
        b"LOCKFAILED" => "LOCKFAILED",
        b"ADDTICKET" => "ADDTICKET",
        b"ACTIVATELOCK" => "ACTIVATELOCK",
        b"LOCKACTIVATED" => "LOCKACTIVATED",
        b"DROPTICKET" => "DROPTICKET",
        b"HASTICKET" => "HASTICKET",
        b"LOCKWAITING" => "LOCKWAITING",
        b"LOCKPING" => "LOCKPING",
        b"LOCKPONG" => "LOCKPONG",
        b"TRANSACTION" => "TRANSACTION",
        b"TXDONE" => "TXDONE",
        b"TXACK" => "TXACK",
        _ => return None,
    })
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

/// The parameter names of snaplock(7) and of the peer messages, sorted: a
/// message keeps these without allocating, and orders two of them by their
/// place here instead of comparing their bytes. Any other valid name is
/// kept as well, in its own allocation.
pub(super) const KNOWN: [&str; 49] = [
    "active",
    "command",
    "delay",
    "description",
    "detach",
    "duration",
    "epoch",
    "error",
    "failed",
    "fence",
    "home",
    "key",
    "leader0",
    "leader1",
    "leader2",
    "limit",
    "links",
    "lockid",
    "max_epoch",
    "message",
    "min_trust",
    "min_uptime",
    "mode",
    "namespace",
    "number",
    "object_name",
    "ok",
    "other_home",
    "other_req",
    "owner",
    "part",
    "pid",
    "policy",
    "position",
    "progress",
    "quiet",
    "reason",
    "req",
    "room",
    "serial",
    "server_name",
    "starttime",
    "tag",
    "timeout",
    "timeout_date",
    "try",
    "unlock_duration",
    "view",
    "wall",
];

/// The name at `rank` of [`KNOWN`].
pub(super) fn known_text(rank: u16) -> &'static str {
    KNOWN.get(usize::from(rank)).copied().unwrap_or_default()
}

/// The place of `name` in [`KNOWN`].
pub(super) fn known_name(name: &[u8]) -> Option<u16> {
    Some(match name {
        b"active" => 0,
        b"command" => 1,
        b"delay" => 2,
        b"description" => 3,
        b"detach" => 4,
        b"duration" => 5,
        b"epoch" => 6,
        b"error" => 7,
        b"failed" => 8,
        b"fence" => 9,
        b"home" => 10,
        b"key" => 11,
        b"leader0" => 12,
        b"leader1" => 13,
        b"leader2" => 14,
        b"limit" => 15,
        b"links" => 16,
        b"lockid" => 17,
        b"max_epoch" => 18,
        b"message" => 19,
        b"min_trust" => 20,
        b"min_uptime" => 21,
        b"mode" => 22,
        b"namespace" => 23,
        b"number" => 24,
        b"object_name" => 25,
        b"ok" => 26,
        b"other_home" => 27,
        b"other_req" => 28,
        b"owner" => 29,
        b"part" => 30,
        b"pid" => 31,
        b"policy" => 32,
        b"position" => 33,
        b"progress" => 34,
        b"quiet" => 35,
        b"reason" => 36,
        b"req" => 37,
        b"room" => 38,
        b"serial" => 39,
        b"server_name" => 40,
        b"starttime" => 41,
        b"tag" => 42,
        b"timeout" => 43,
        b"timeout_date" => 44,
        b"try" => 45,
        b"unlock_duration" => 46,
        b"view" => 47,
        b"wall" => 48,
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
    // A valid name without lowercase, in one pass.
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && !name[0].is_ascii_digit()
        && name
            .iter()
            .all(|&b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

/// Appends `v` in decimal, without the formatting machinery (numbers are
/// written by the million in a handover).
pub(crate) fn put_u64(out: &mut Vec<u8>, v: u64) {
    let mut digits = [0u8; 20];
    out.extend_from_slice(decimal_bytes(v, &mut digits));
}

/// `v` in decimal, written at the end of `digits`: the digits' slice.
pub(crate) fn decimal(v: u64, digits: &mut [u8; 20]) -> &str {
    std::str::from_utf8(decimal_bytes(v, digits)).unwrap_or_default()
}

/// [`decimal`] as bytes, without checking that digits are text (they
/// are): what the writers of lines use. Two digits at a time: fences and
/// epochs have 13 to 19.
pub(crate) fn decimal_bytes(mut v: u64, digits: &mut [u8; 20]) -> &[u8] {
    const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
        2021222324252627282930313233343536373839\
        4041424344454647484950515253545556575859\
        6061626364656667686970717273747576777879\
        8081828384858687888990919293949596979899";
    let mut at = digits.len();
    while v >= 100 {
        let pair = (v % 100) as usize * 2;
        v /= 100;
        at -= 2;
        digits[at..at + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    }
    if v >= 10 {
        let pair = v as usize * 2;
        at -= 2;
        digits[at..at + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    } else {
        at -= 1;
        digits[at] = b'0' + v as u8;
    }
    &digits[at..]
}
