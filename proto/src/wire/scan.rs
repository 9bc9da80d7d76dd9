//! A line read in place, without a [`Message`]: for the messages agents
//! send each other by the hundred thousand a second.
//!
//! [`scan`] takes only the plain lines [`Line`](super::Line) writes: no
//! `<server:service ` prefix, no destination, no quoted value, no
//! backslash, no name given twice, at most [`SCAN_FIELDS`] parameters.
//! Any other line, well
//! formed or not, is left to [`parse()`](super::parse()): `scan` answers
//! `None` and the caller parses it. Whenever it answers, [`parse()`] would
//! have given a message with the same command and the same value for every
//! name (`tests/scan.rs` holds the two to that), so a reader written once
//! against [`Fields`] reads both the same.

use super::Message;
use super::encode::bytes_equal;
use super::message::{MAX_NAME_LEN, is_valid_command};

/// The most parameters [`scan`] takes; a line with more is parsed.
pub(crate) const SCAN_FIELDS: usize = 16;

/// What a reader of a message asks of it: its command, and its values by
/// name. A [`Message`] and a [`Scanned`] line both answer.
pub trait Fields {
    /// The command.
    fn command(&self) -> &str;
    /// The value of `name` (the last one given).
    fn get(&self, name: &str) -> Option<&[u8]>;
    /// The value of `name`, taken out: asked again, it is absent.
    fn take(&mut self, name: &str) -> Option<Vec<u8>>;
    /// The value of `name` when it is text.
    fn get_str(&self, name: &str) -> Option<&str> {
        self.get(name).and_then(|v| std::str::from_utf8(v).ok())
    }
}

impl Fields for Message {
    fn command(&self) -> &str {
        self.command.as_str()
    }

    fn get(&self, name: &str) -> Option<&[u8]> {
        Message::get(self, name)
    }

    fn take(&mut self, name: &str) -> Option<Vec<u8>> {
        self.remove(name)
    }
}

/// One parameter of a scanned line: its name's first bytes as a number
/// ([`prefix`]) and length, where its name and value are.
#[derive(Clone, Copy, Default)]
struct Field {
    prefix: u64,
    name_len: u32,
    name: u32,
    start: u32,
    end: u32,
}

/// The first eight bytes of `name`, big-endian, zero-padded: two names of
/// one length with different prefixes differ. A constant name's is a
/// constant.
#[inline(always)]
fn prefix(name: &[u8]) -> u64 {
    (0..8).fold(0, |key, i| {
        key << 8 | u64::from(name.get(i).copied().unwrap_or(0))
    })
}

/// The prefix of the name of `len` bytes at `at` in `line`, read in one
/// load when eight bytes are there (they are, but at the end of a line).
#[inline]
fn prefix_at(line: &[u8], at: usize, len: usize) -> u64 {
    match line
        .get(at..at + 8)
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
    {
        Some(bytes) if len < 8 => u64::from_be_bytes(bytes) & !(u64::MAX >> (8 * len)),
        Some(bytes) => u64::from_be_bytes(bytes),
        None => prefix(&line[at..at + len]),
    }
}

/// The bit of a name of prefix `key` and length `len` in a line's set of
/// names ([`Scanned::names`]).
#[inline(always)]
fn name_bit(key: u64, len: usize) -> u64 {
    let hash = key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58;
    1 << ((hash ^ len as u64) & 63)
}

/// A plain line, its parameters found but nothing copied.
pub(crate) struct Scanned<'a> {
    line: &'a [u8],
    command: &'a str,
    fields: [Field; SCAN_FIELDS],
    len: usize,
    /// The [`name_bit`] of every name: a name whose bit is not there is
    /// not either, known without a look at the fields.
    names: u64,
    /// Bit i: field i was taken.
    taken: u32,
}

/// Bytes of a parameter name.
const NAME: u8 = 1;
/// Bytes that end a plain value, or make it not plain.
const STOP: u8 = 2;

/// What each byte is to the scanner.
static CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        if c.is_ascii_alphanumeric() || c == b'_' {
            t[b] = NAME;
        }
        if c == b';' || c == b'\\' {
            t[b] = STOP;
        }
        b += 1;
    }
    t
};

/// Finds the command and parameters of a plain line (without its `\n`);
/// `None` for any other line, which [`parse()`](super::parse()) must read.
/// A name given twice is left to `parse()` too: a plain line has each once.
pub(crate) fn scan(line: &[u8]) -> Option<Scanned<'_>> {
    // A line of 4 GiB is not one a peer may send; offsets fit in u32.
    if line.first() == Some(&b'<') || u32::try_from(line.len()).is_err() {
        return None;
    }
    let word_end = memchr::memchr(b' ', line).unwrap_or(line.len());
    let command = &line[..word_end];
    // Also refuses a destination: `:` and `/` are not in a command.
    if !is_valid_command(command) {
        return None;
    }
    let mut s = Scanned {
        line,
        command: std::str::from_utf8(command).ok()?,
        fields: [Field::default(); SCAN_FIELDS],
        len: 0,
        names: 0,
        taken: 0,
    };
    // Every offset is below the line's length, checked to fit.
    let at = |i: usize| u32::try_from(i).unwrap_or(u32::MAX);
    let mut pos = (word_end + 1).min(line.len());
    while pos < line.len() {
        let mut eq = pos;
        while line.get(eq).is_some_and(|&b| CLASS[usize::from(b)] == NAME) {
            eq += 1;
        }
        let name = &line[pos..eq];
        if line.get(eq) != Some(&b'=')
            || name.len() > MAX_NAME_LEN
            || name.first().is_none_or(u8::is_ascii_digit)
            || s.len == SCAN_FIELDS
        {
            return None;
        }
        let start = eq + 1;
        if line.get(start) == Some(&b'"') {
            return None;
        }
        let end = value_end(line, start);
        if line.get(end) == Some(&b'\\') {
            return None;
        }
        let field = Field {
            prefix: prefix_at(line, pos, name.len()),
            name_len: at(name.len()),
            name: at(pos),
            start: at(start),
            end: at(end),
        };
        // A name seen before is most often told apart by its bit; only
        // when the bits collide are the names compared.
        let bit = name_bit(field.prefix, name.len());
        if s.names & bit != 0 && s.find_field(field.prefix, name).is_some() {
            return None;
        }
        s.names |= bit;
        s.fields[s.len] = field;
        s.len += 1;
        pos = (end + 1).min(line.len());
    }
    Some(s)
}

/// Where the plain value from `start` ends: at its `;`, at a `\`, or at the
/// end of the line. Eight bytes at a time: a value is an object name or an
/// id, tens of bytes.
fn value_end(line: &[u8], start: usize) -> usize {
    let mut i = start;
    while let Some(chunk) = line.get(i..i + 8) {
        let Ok(bytes) = <[u8; 8]>::try_from(chunk) else {
            break; // cannot be: the chunk is eight bytes
        };
        let w = u64::from_le_bytes(bytes);
        let stops = bytes_equal(w, b';') | bytes_equal(w, b'\\');
        if stops != 0 {
            return i + (stops.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while line.get(i).is_some_and(|&b| CLASS[usize::from(b)] != STOP) {
        i += 1;
    }
    i
}

impl Scanned<'_> {
    /// The place of the field named `name`, `key` its [`prefix`], taken
    /// or not.
    #[inline(always)]
    fn find_field(&self, key: u64, name: &[u8]) -> Option<usize> {
        if self.names & name_bit(key, name.len()) == 0 {
            return None;
        }
        (0..self.len).find(|&i| {
            let f = &self.fields[i];
            f.prefix == key
                && f.name_len as usize == name.len()
                && (name.len() <= 8 || {
                    let at = f.name as usize;
                    self.line[at + 8..at + name.len()] == name[8..]
                })
        })
    }

    /// The place of the field named `name`, unless it was taken.
    #[inline(always)]
    fn find(&self, name: &str) -> Option<usize> {
        let name = name.as_bytes();
        self.find_field(prefix(name), name)
            .filter(|&i| self.taken & (1 << i) == 0)
    }

    #[inline(always)]
    fn value(&self, i: usize) -> &[u8] {
        let f = &self.fields[i];
        &self.line[f.start as usize..f.end as usize]
    }
}

impl Fields for Scanned<'_> {
    fn command(&self) -> &str {
        self.command
    }

    #[inline(always)]
    fn get(&self, name: &str) -> Option<&[u8]> {
        self.find(name).map(|i| self.value(i))
    }

    #[inline(always)]
    fn take(&mut self, name: &str) -> Option<Vec<u8>> {
        let i = self.find(name)?;
        self.taken |= 1 << i;
        Some(self.value(i).to_vec())
    }
}
