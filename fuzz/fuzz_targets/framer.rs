//! Any byte stream, cut into any chunks, through `LineFramer`: the frames
//! are those of the whole stream, an oversized line is reported once, and
//! the buffer never holds more than the limit and one chunk.

#![no_main]

use libfuzzer_sys::fuzz_target;
use snaplock_proto::wire::{Frame, LineFramer};

const PREFIX: usize = 256;

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let max = usize::from(first % 80);
    // The rest is chunks: a length byte, then that many bytes.
    let mut chunks = Vec::new();
    let mut stream = Vec::new();
    let mut rest = rest;
    while let Some((&len, tail)) = rest.split_first() {
        let n = usize::from(len % 64).min(tail.len());
        chunks.push(&tail[..n]);
        stream.extend_from_slice(&tail[..n]);
        rest = &tail[n..];
    }

    let mut framer = LineFramer::new(max);
    let mut got: Vec<Result<Vec<u8>, Vec<u8>>> = Vec::new();
    for chunk in &chunks {
        framer.buffer_mut().extend_from_slice(chunk);
        assert!(
            framer.pending() <= max + 1 + chunk.len(),
            "pending {}",
            framer.pending()
        );
        for _ in 0..=chunk.len() {
            match framer.next_line() {
                Some(Frame::Line(line)) => {
                    assert!(line.len() <= max);
                    got.push(Ok(line.to_vec()));
                }
                Some(Frame::TooLong { prefix }) => {
                    assert!(!prefix.is_empty() && prefix.len() <= PREFIX);
                    got.push(Err(prefix.to_vec()));
                }
                None => break,
            }
        }
        assert!(
            framer.pending() <= max + 1,
            "pending {} after draining",
            framer.pending()
        );
    }
    assert!(
        framer.next_line().is_none(),
        "a frame after None with no new bytes"
    );

    // The same stream, cut at its line ends all at once.
    let mut raw_lines: Vec<&[u8]> = stream.split(|&b| b == b'\n').collect();
    let unfinished = raw_lines.pop().unwrap_or_default();
    assert_eq!(
        got.len(),
        raw_lines.len() + usize::from(unfinished.len() > max + 1)
    );
    for (frame, raw) in got.iter().zip(&raw_lines) {
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        match frame {
            Ok(l) => assert_eq!(l, line),
            Err(prefix) => {
                assert!(line.len() > max, "{raw:?} is not too long for {max}");
                assert!(raw.starts_with(prefix) && prefix.len() >= (max + 1).min(PREFIX));
            }
        }
    }
    if unfinished.len() > max + 1 {
        let Some(Err(prefix)) = got.last() else {
            panic!("unfinished long line not reported")
        };
        assert!(unfinished.starts_with(prefix));
        assert!(!framer.has_partial_line());
    } else {
        assert_eq!(framer.pending(), unfinished.len());
        assert_eq!(framer.has_partial_line(), !unfinished.is_empty());
    }
});
