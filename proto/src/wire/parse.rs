//! One line of bytes to a [`Message`]: total, bounded, and exact about
//! where a line is wrong.
//!
//! The grammar is the original snapcommunicator's (snaplock(7), GRAMMAR), with one deliberate
//! difference: inside a quoted value a backslash always escapes the next
//! byte while looking for the closing quote, so the value `a;b\`, written
//! `"a;b\\"`, reads back as `a;b\` (the original took `\"` for an escaped
//! quote and mis-parsed it).

use std::fmt;

use super::message::{
    Command, MAX_NAME_LEN, MAX_PARAMS, Message, is_valid_command, is_valid_name, known_name,
    known_text,
};

/// Why a line is not a message, and at which byte (0-based) it went wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// Offset in the line of the byte where parsing stopped.
    pub column: usize,
    /// What is wrong, for a human reader.
    pub reason: ParseErrorKind,
}

/// The ways a line can be malformed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParseErrorKind {
    /// Nothing but the prefixes: no command.
    MissingCommand,
    /// The command is not `[A-Z_][A-Z0-9_]*`.
    BadCommand,
    /// A `<server:service ` prefix without its `:` or its closing space.
    BadSentFrom,
    /// A server or service name that is not `[A-Za-z0-9_]+` (or `*`, `?`, `.`).
    BadDestination,
    /// Two `:` or two `/` in the destination, or a `:` after the `/`.
    RepeatedDestination,
    /// A parameter name that is empty or not `[A-Za-z_][A-Za-z0-9_]*`.
    BadParameterName,
    /// A parameter without `=`.
    MissingEquals,
    /// A quoted value without its closing quote.
    UnterminatedQuote,
    /// Something other than `;` right after a closing quote.
    MissingSemicolon,
    /// More than [`MAX_PARAMS`] parameters.
    TooManyParameters,
}

impl ParseErrorKind {
    /// A short English description.
    pub fn as_str(self) -> &'static str {
        match self {
            ParseErrorKind::MissingCommand => "missing command",
            ParseErrorKind::BadCommand => "command must be UPPERCASE letters, digits or '_'",
            ParseErrorKind::BadSentFrom => "malformed '<server:service ' prefix",
            ParseErrorKind::BadDestination => "malformed server or service name",
            ParseErrorKind::RepeatedDestination => "malformed 'server:service/' prefix",
            ParseErrorKind::BadParameterName => {
                "parameter name must be letters, digits or '_', not starting with a digit"
            }
            ParseErrorKind::MissingEquals => "parameter without '='",
            ParseErrorKind::UnterminatedQuote => "quoted value without closing quote",
            ParseErrorKind::MissingSemicolon => "parameters must be separated by ';'",
            ParseErrorKind::TooManyParameters => "too many parameters",
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at column {}", self.reason.as_str(), self.column + 1)
    }
}

impl std::error::Error for ParseError {}

fn err<T>(column: usize, reason: ParseErrorKind) -> Result<T, ParseError> {
    Err(ParseError { column, reason })
}

fn is_valid_server(name: &[u8]) -> bool {
    name == b"." || name == b"*" || is_valid_name(name)
}

fn is_valid_service(name: &[u8]) -> bool {
    name == b"." || name == b"*" || name == b"?" || is_valid_name(name)
}

/// The command of a line, when its prefixes and command are well formed,
/// even if its parameters are not: lets an `INVALID` reply name the command.
pub fn command_of(line: &[u8]) -> Option<&str> {
    let mut pos = 0;
    if line.first() == Some(&b'<') {
        pos = line.iter().position(|&b| b == b' ')? + 1;
    }
    let word_end = line[pos..]
        .iter()
        .position(|&b| b == b' ')
        .map_or(line.len(), |i| pos + i);
    let word = &line[pos..word_end];
    let start = word
        .iter()
        .rposition(|&b| b == b'/' || b == b':')
        .map_or(0, |i| i + 1);
    let command = &word[start..];
    if is_valid_command(command) {
        std::str::from_utf8(command).ok()
    } else {
        None
    }
}

/// Parses one line as [`encode`](super::encode()) writes it, its `\n`
/// included (an [`Output::PeerSend`](crate::core::Output::PeerSend)'s).
pub fn parse_line(line: &[u8]) -> Result<Message, ParseError> {
    parse(line.strip_suffix(b"\n").unwrap_or(line))
}

/// Parses one line (without its `\n`; a trailing `\r` is the framer's to
/// remove). Never panics; the work is linear in the line length.
pub fn parse(line: &[u8]) -> Result<Message, ParseError> {
    let mut msg = Message::new("");
    let mut pos = 0;

    // `<server:service ` — who sent it.
    if line.first() == Some(&b'<') {
        pos = 1;
        let colon = match line[pos..].iter().position(|&b| b == b':' || b == b' ') {
            Some(i) if line[pos + i] == b':' => pos + i,
            Some(i) => return err(pos + i, ParseErrorKind::BadSentFrom),
            None => return err(line.len(), ParseErrorKind::BadSentFrom),
        };
        let space = match line[colon + 1..].iter().position(|&b| b == b' ') {
            Some(i) => colon + 1 + i,
            None => return err(line.len(), ParseErrorKind::BadSentFrom),
        };
        let server = &line[pos..colon];
        let service = &line[colon + 1..space];
        if !is_valid_server(server) {
            return err(pos, ParseErrorKind::BadDestination);
        }
        if !is_valid_service(service) {
            return err(colon + 1, ParseErrorKind::BadDestination);
        }
        msg.sent_from_server = ascii(server);
        msg.sent_from_service = ascii(service);
        pos = space + 1;
    }

    // `[server:]service/COMMAND` — the first word.
    let word_end = memchr::memchr(b' ', &line[pos..]).map_or(line.len(), |i| pos + i);
    let mut start = pos;
    let mut seen_service = false;
    let mut seen_server = false;
    for i in pos..word_end {
        match line[i] {
            b':' => {
                let part = &line[start..i];
                if seen_server || seen_service {
                    return err(i, ParseErrorKind::RepeatedDestination);
                }
                if !is_valid_server(part) {
                    return err(start, ParseErrorKind::BadDestination);
                }
                msg.server = ascii(part);
                seen_server = true;
                start = i + 1;
            }
            b'/' => {
                let part = &line[start..i];
                if seen_service {
                    return err(i, ParseErrorKind::RepeatedDestination);
                }
                if !is_valid_service(part) {
                    return err(start, ParseErrorKind::BadDestination);
                }
                msg.service = ascii(part);
                seen_service = true;
                start = i + 1;
            }
            _ => {}
        }
    }
    let command = &line[start..word_end];
    if command.is_empty() {
        return err(start, ParseErrorKind::MissingCommand);
    }
    if !is_valid_command(command) {
        return err(start, ParseErrorKind::BadCommand);
    }
    msg.command = Command::from(std::str::from_utf8(command).unwrap_or_default());
    pos = word_end;
    if pos == line.len() {
        return Ok(msg);
    }
    pos += 1; // the space after the command
    // The values are at most what is left of the line: one allocation.
    msg.reserve_values(line.len() - pos);

    // `name=value;name="quoted";...` — a trailing `;` is accepted.
    while pos < line.len() {
        let window = &line[pos..line.len().min(pos + MAX_NAME_LEN + 1)];
        let eq = match memchr::memchr2(b'=', b';', window) {
            Some(i) if line[pos + i] == b'=' => pos + i,
            Some(i) => return err(pos + i, ParseErrorKind::MissingEquals),
            None if line.len() - pos <= MAX_NAME_LEN => {
                return err(line.len(), ParseErrorKind::MissingEquals);
            }
            None => return err(pos, ParseErrorKind::BadParameterName),
        };
        let name = &line[pos..eq];
        // A name the protocol knows is valid: no check, no copy.
        let known = known_name(name);
        let name = match known {
            Some(rank) => known_text(rank),
            // Checked to be ASCII, so always text.
            None => match std::str::from_utf8(name) {
                Ok(name) if is_valid_name(name.as_bytes()) => name,
                _ => return err(pos, ParseErrorKind::BadParameterName),
            },
        };
        pos = eq + 1;
        // Where the value is, whether it is quoted, whether it has a `\`.
        let value: (usize, usize, bool, bool);
        if line.get(pos) == Some(&b'"') {
            let open = pos;
            let mut i = pos + 1;
            let mut escaped = false;
            loop {
                match line.get(i) {
                    None => return err(open, ParseErrorKind::UnterminatedQuote),
                    Some(b'\\') => (i, escaped) = (i + 2, true),
                    Some(b'"') => break,
                    Some(_) => i += 1,
                }
            }
            value = (open + 1, i, true, escaped);
            pos = i + 1;
            match line.get(pos) {
                None => {}
                Some(b';') => pos += 1,
                Some(_) => return err(pos, ParseErrorKind::MissingSemicolon),
            }
        } else {
            // One pass finds the end of a value without escapes (most).
            let (end, escaped) = match memchr::memchr2(b';', b'\\', &line[pos..]) {
                Some(i) if line[pos + i] == b'\\' => {
                    let end = memchr::memchr(b';', &line[pos + i..]);
                    (end.map_or(line.len(), |j| pos + i + j), true)
                }
                Some(i) => (pos + i, false),
                None => (line.len(), false),
            };
            value = (pos, end, false, escaped);
            pos = if end < line.len() { end + 1 } else { end };
        }
        // As in snapcommunicator, a repeated name replaces the earlier value.
        if msg.param_count() == MAX_PARAMS && msg.get(name).is_none() {
            return err(eq - name.len(), ParseErrorKind::TooManyParameters);
        }
        let (from, to, quoted, escaped) = value;
        let start = msg.start_value(to - from);
        if escaped {
            unescape(&line[from..to], quoted, msg.value_bytes());
        } else {
            msg.value_bytes().extend_from_slice(&line[from..to]);
        }
        msg.end_value_known(name, known, start);
    }
    Ok(msg)
}

/// Undoes the encoder's escapes in one left-to-right pass: `\\`, `\n`, `\r`,
/// and `\"` inside quotes. Any other backslash pair is kept as it is.
/// Appends the value to `out`.
fn unescape(raw: &[u8], quoted: bool, out: &mut Vec<u8>) {
    let mut i = 0;
    while i < raw.len() {
        let b = raw[i];
        if b == b'\\' && i + 1 < raw.len() {
            let replaced = match raw[i + 1] {
                b'\\' => Some(b'\\'),
                b'n' => Some(b'\n'),
                b'r' => Some(b'\r'),
                b'"' if quoted => Some(b'"'),
                _ => None,
            };
            if let Some(r) = replaced {
                out.push(r);
                i += 2;
                continue;
            }
        }
        out.push(b);
        i += 1;
    }
}

/// Names were checked to be ASCII before this is called.
fn ascii(bytes: &[u8]) -> String {
    std::str::from_utf8(bytes).unwrap_or_default().to_owned()
}
