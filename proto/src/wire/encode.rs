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

/// Eight bytes at a time: the high bit of every byte of `word` that is
/// `b`, and perhaps of some above the lowest of them (a borrow), so the
/// mask is non-zero exactly when a byte is `b`, and its lowest bit marks
/// the first one (the zero-byte test).
pub(super) fn bytes_equal(word: u64, b: u8) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let x = word ^ (ONES * u64::from(b));
    x.wrapping_sub(ONES) & !x & HIGHS
}

/// Whether `value` holds a byte of [`SPECIAL`]: eight bytes at a time
/// (a value is an object name or an id, tens of bytes).
fn has_special(value: &[u8]) -> bool {
    let has = bytes_equal;
    let mut words = value.chunks_exact(8);
    for chunk in &mut words {
        let Ok(bytes) = <[u8; 8]>::try_from(chunk) else {
            return true; // cannot be: a chunk is eight bytes
        };
        let w = u64::from_le_bytes(bytes);
        if has(w, b'\\') | has(w, b'\n') | has(w, b'\r') | has(w, b'"') | has(w, b';') != 0 {
            return true;
        }
    }
    words.remainder().iter().any(|&b| SPECIAL[usize::from(b)])
}

/// Appends `value` as the grammar writes a value.
pub(super) fn encode_value(value: &[u8], out: &mut Vec<u8>) {
    // Most values need no escape and no quotes: copied in one go.
    if !has_special(value) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_special_byte_is_found_wherever_it_is() {
        for len in 0..40 {
            let plain: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
            assert!(!has_special(&plain), "{len}");
            for at in 0..len {
                for b in 0..=255u8 {
                    let mut v = plain.clone();
                    v[at] = b;
                    assert_eq!(has_special(&v), SPECIAL[usize::from(b)], "{len} {at} {b}");
                }
            }
        }
    }
}
