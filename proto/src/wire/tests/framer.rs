//! The framer: partial input, line ends, and its bounds on oversized lines.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::super::{Frame, LineFramer};

/// Appends `chunk` and drains every frame, as owned values.
fn feed(framer: &mut LineFramer, chunk: &[u8]) -> Vec<Result<Vec<u8>, Vec<u8>>> {
    framer.buffer_mut().extend_from_slice(chunk);
    let mut frames = Vec::new();
    for _ in 0..chunk.len() + 1 {
        match framer.next_line() {
            Some(Frame::Line(line)) => frames.push(Ok(line.to_vec())),
            Some(Frame::TooLong { prefix }) => frames.push(Err(prefix.to_vec())),
            None => return frames,
        }
    }
    panic!("next_line returned more frames than bytes fed");
}

fn lines(v: &[&[u8]]) -> Vec<Result<Vec<u8>, Vec<u8>>> {
    v.iter().map(|l| Ok(l.to_vec())).collect()
}

#[test]
fn partial_input_waits_then_gives_the_line() {
    let mut f = LineFramer::new(100);
    assert_eq!(feed(&mut f, b"LOCK obj"), vec![]);
    assert!(f.has_partial_line());
    assert_eq!(feed(&mut f, b"ect_name=a"), vec![]);
    assert_eq!(feed(&mut f, b"\n"), lines(&[b"LOCK object_name=a"]));
    assert_eq!((f.pending(), f.has_partial_line()), (0, false));
}

#[test]
fn crlf_line_ends_lose_their_cr_and_only_that_cr() {
    let mut f = LineFramer::new(100);
    assert_eq!(
        feed(&mut f, b"A\r\nB\r\r\nC\rD\n"),
        lines(&[b"A", b"B\r", b"C\rD"])
    );
    assert_eq!(feed(&mut f, b"E\r"), vec![]);
    assert_eq!(feed(&mut f, b"\n"), lines(&[b"E"]));
}

#[test]
fn several_lines_in_one_chunk_come_out_in_order() {
    let mut f = LineFramer::new(100);
    assert_eq!(
        feed(&mut f, b"ONE\nTWO a=1\nTHREE\nfour"),
        lines(&[b"ONE", b"TWO a=1", b"THREE"])
    );
    assert_eq!(f.pending(), 4);
    assert_eq!(feed(&mut f, b"\n"), lines(&[b"four"]));
}

#[test]
fn a_line_fed_byte_by_byte_comes_out_whole_once() {
    let mut f = LineFramer::new(100);
    let input = b"LOCK object_name=a;tag=1\r\nUNLOCK object_name=a\n";
    let mut out = Vec::new();
    for &b in input {
        out.extend(feed(&mut f, &[b]));
    }
    assert_eq!(
        out,
        lines(&[b"LOCK object_name=a;tag=1", b"UNLOCK object_name=a"])
    );
}

#[test]
fn empty_lines_are_lines() {
    let mut f = LineFramer::new(100);
    assert_eq!(feed(&mut f, b"\n\r\n\nX\n"), lines(&[b"", b"", b"", b"X"]));
}

#[test]
fn a_line_of_exactly_the_limit_passes_and_one_more_byte_does_not() {
    let mut f = LineFramer::new(8);
    assert_eq!(feed(&mut f, b"12345678\n"), lines(&[b"12345678"]));
    assert_eq!(
        feed(&mut f, b"12345678\r\n"),
        lines(&[b"12345678"]),
        "the CR does not count"
    );
    assert_eq!(
        feed(&mut f, b"123456789\n"),
        vec![Err(b"123456789".to_vec())]
    );
    // Byte by byte, the same limits.
    let mut out = Vec::new();
    for &b in b"12345678\r\n123456789\n" {
        out.extend(feed(&mut f, &[b]));
    }
    assert_eq!(
        out,
        vec![Ok(b"12345678".to_vec()), Err(b"123456789".to_vec())]
    );
}

#[test]
fn an_oversized_line_arriving_at_once_is_reported_once_and_the_next_line_is_intact() {
    let mut f = LineFramer::new(1000);
    let mut input = vec![b'x'; 5000];
    input.extend_from_slice(b"\nNEXT a=1\n");
    let out = feed(&mut f, &input);
    assert_eq!(out, vec![Err(vec![b'x'; 256]), Ok(b"NEXT a=1".to_vec())]);
    assert_eq!(f.pending(), 0);
}

#[test]
fn an_oversized_line_arriving_in_small_chunks_is_reported_once_and_the_next_line_is_intact() {
    for chunk in [1, 7, 100, 999, 1001, 1002, 4096] {
        let mut f = LineFramer::new(1000);
        let mut input = vec![b'y'; 5000];
        input.extend_from_slice(b"\r\nNEXT\nLAST\n");
        let mut out = Vec::new();
        for piece in input.chunks(chunk) {
            out.extend(feed(&mut f, piece));
        }
        let too_long: Vec<_> = out.iter().filter(|f| f.is_err()).collect();
        assert_eq!(too_long.len(), 1, "chunk {chunk}: {out:?}");
        assert_eq!(too_long[0], &Err(vec![b'y'; 256]), "chunk {chunk}");
        assert_eq!(out[1..], lines(&[b"NEXT", b"LAST"])[..], "chunk {chunk}");
    }
}

#[test]
fn memory_stays_bounded_while_a_line_without_end_streams_in() {
    const MAX: usize = 64 * 1024;
    const CHUNK: usize = 4096;
    let mut f = LineFramer::new(MAX);
    let chunk = vec![b'z'; CHUNK];
    let mut reports = 0;
    for _ in 0..(10 << 20) / CHUNK {
        f.buffer_mut().extend_from_slice(&chunk);
        assert!(f.pending() <= MAX + 1 + CHUNK, "pending {}", f.pending());
        for _ in 0..3 {
            match f.next_line() {
                Some(Frame::TooLong { .. }) => reports += 1,
                Some(Frame::Line(line)) => panic!("a line of {} bytes came out", line.len()),
                None => break,
            }
        }
        assert!(
            f.pending() <= MAX + 1,
            "pending {} after draining",
            f.pending()
        );
        assert!(
            f.buffer_mut().capacity() <= 4 * (MAX + CHUNK),
            "the buffer does not grow with the line"
        );
    }
    assert_eq!(reports, 1);
    assert!(
        !f.has_partial_line(),
        "skipped bytes are not a partial line"
    );
    assert_eq!(feed(&mut f, b"tail\nNEXT\n"), lines(&[b"NEXT"]));
}

#[test]
fn lines_cut_at_random_places_come_out_as_sent() {
    let mut rng = StdRng::seed_from_u64(0x5eed_0003);
    for case in 0..300 {
        let max = rng.random_range(1..64);
        let sent: Vec<Vec<u8>> = (0..rng.random_range(0..20))
            .map(|_| {
                let len = rng.random_range(0..max * 2);
                (0..len)
                    .map(|_| if rng.random_bool(0.1) { b'\r' } else { b'a' })
                    .collect()
            })
            .collect();
        let stream: Vec<u8> = sent
            .iter()
            .flat_map(|l| l.iter().copied().chain([b'\n']))
            .collect();
        let mut f = LineFramer::new(max);
        let mut out = Vec::new();
        let mut rest = &stream[..];
        while !rest.is_empty() {
            let n = rng.random_range(1..=rest.len().min(3 * max));
            out.extend(feed(&mut f, &rest[..n]));
            rest = &rest[n..];
        }
        // A line found too long before its end is reported with what had
        // arrived of it: check that prefix against the raw line.
        assert_eq!(out.len(), sent.len(), "case {case}: {out:?} vs {sent:?}");
        for (got, raw) in out.iter().zip(&sent) {
            let line = raw.strip_suffix(b"\r").unwrap_or(raw);
            match got {
                Ok(g) => assert_eq!(g, line, "case {case}"),
                Err(g) => {
                    assert!(line.len() > max, "case {case}: {raw:?} reported too long");
                    assert!(
                        raw.starts_with(g) && g.len() >= (max + 1).min(256),
                        "case {case}"
                    );
                    assert!(g.len() <= 256, "case {case}");
                }
            }
        }
    }
}
