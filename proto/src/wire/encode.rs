//! [`Message`] to bytes: the exact inverse of [`parse`](super::parse()).

use super::message::Message;

/// Appends `msg` and a `\n` to `out`.
///
/// Writes the prefixes the grammar allows, the command, then the
/// parameters in sorted name order. A value is escaped (`\` → `\\`,
/// LF → `\n`, CR → `\r`); when it then contains `;` or starts with `"`, its
/// quotes are escaped and it is wrapped in double quotes (snaplock(7), GRAMMAR).
pub fn encode(msg: &Message, out: &mut Vec<u8>) {
    if !msg.sent_from_server.is_empty() || !msg.sent_from_service.is_empty() {
        out.push(b'<');
        out.extend_from_slice(msg.sent_from_server.as_bytes());
        out.push(b':');
        out.extend_from_slice(msg.sent_from_service.as_bytes());
        out.push(b' ');
    }
    if !msg.service.is_empty() {
        if !msg.server.is_empty() {
            out.extend_from_slice(msg.server.as_bytes());
            out.push(b':');
        }
        out.extend_from_slice(msg.service.as_bytes());
        out.push(b'/');
    }
    out.extend_from_slice(msg.command.as_bytes());
    for (i, (name, value)) in msg.params().enumerate() {
        out.push(if i == 0 { b' ' } else { b';' });
        out.extend_from_slice(name.as_bytes());
        out.push(b'=');
        encode_value(value, out);
    }
    out.push(b'\n');
}

/// The encoded line of `msg`, `\n` included.
pub fn encode_to_vec(msg: &Message) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    encode(msg, &mut out);
    out
}

/// The bytes a value cannot carry as they are: `\\`, LF, CR, `"`, `;`.
const SPECIAL: [bool; 256] = {
    let mut t = [false; 256];
    t[b'\\' as usize] = true;
    t[b'\n' as usize] = true;
    t[b'\r' as usize] = true;
    t[b'"' as usize] = true;
    t[b';' as usize] = true;
    t
};

/// Appends `value` as the grammar writes a value.
pub(super) fn encode_value(value: &[u8], out: &mut Vec<u8>) {
    // Most values need no escape and no quotes: copied in one go.
    if !value.iter().any(|&b| SPECIAL[usize::from(b)]) {
        out.extend_from_slice(value);
        return;
    }
    let quoted = value.first() == Some(&b'"') || value.contains(&b';');
    if quoted {
        out.push(b'"');
    }
    for &b in value {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'"' if quoted => out.extend_from_slice(b"\\\""),
            _ => out.push(b),
        }
    }
    if quoted {
        out.push(b'"');
    }
}
