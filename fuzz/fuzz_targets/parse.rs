//! Any bytes through `parse`: never a panic, an error column within the
//! line, and whatever parses writes back to a line that parses the same.

#![no_main]

use libfuzzer_sys::fuzz_target;
use snaplock_proto::wire::{command_of, encode_to_vec, parse};

fuzz_target!(|line: &[u8]| {
    let msg = match parse(line) {
        Ok(msg) => msg,
        Err(e) => {
            assert!(e.column <= line.len(), "{e:?} past the end of {line:?}");
            return;
        }
    };
    assert_eq!(command_of(line), Some(msg.command.as_str()));
    let encoded = encode_to_vec(&msg);
    assert_eq!(
        encoded.iter().position(|&b| b == b'\n'),
        Some(encoded.len() - 1)
    );
    // The grammar reads `server:COMMAND` (a server without a service) but
    // writes `server:` only before a service.
    let mut expressible = msg.clone();
    if expressible.service.is_empty() {
        expressible.server.clear();
    }
    let again = parse(&encoded[..encoded.len() - 1]).expect("an encoded message parses");
    assert_eq!(again, expressible);
    assert_eq!(encode_to_vec(&again), encoded, "encoding is canonical");
});
