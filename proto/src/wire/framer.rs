//! Cuts a byte stream into lines: incremental, bounded, `\r\n` tolerant.

/// What [`LineFramer::next_line`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// A complete line, without its `\n` or `\r\n`.
    Line(&'a [u8]),
    /// A line longer than the limit began here; it is reported once and its
    /// bytes are skipped up to the next `\n`. `prefix` is its first bytes.
    TooLong {
        /// The first bytes of the oversized line (at most 256).
        prefix: &'a [u8],
    },
}

/// An incremental line framer over a caller-owned buffer.
///
/// The caller appends what it read to [`buffer_mut`](Self::buffer_mut),
/// then calls [`next_line`](Self::next_line) until it returns `None`.
/// The buffer never holds more than `max_line` + one read's worth of bytes
/// of a line: a longer line is reported once as [`Frame::TooLong`] and the
/// rest of it is dropped as it arrives.
#[derive(Debug)]
pub struct LineFramer {
    buf: Vec<u8>,
    /// Start of the unconsumed bytes.
    start: usize,
    /// Bytes before this offset (from `start`) hold no `\n`.
    scanned: usize,
    max_line: usize,
    /// Inside an oversized line: drop bytes up to the next `\n`.
    discarding: bool,
}

impl LineFramer {
    /// A framer that accepts lines of at most `max_line` bytes (without `\n`).
    pub fn new(max_line: usize) -> LineFramer {
        LineFramer {
            buf: Vec::new(),
            start: 0,
            scanned: 0,
            max_line,
            discarding: false,
        }
    }

    /// The buffer to append freshly read bytes to. Consumed lines are
    /// compacted away first, so it only holds the unconsumed tail.
    pub fn buffer_mut(&mut self) -> &mut Vec<u8> {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        &mut self.buf
    }

    /// Bytes received but not yet returned as a line.
    pub fn pending(&self) -> usize {
        self.buf.len() - self.start
    }

    /// Whether an incomplete line is waiting for more bytes.
    pub fn has_partial_line(&self) -> bool {
        self.pending() > 0 && !self.discarding
    }

    /// The next complete line, a one-time report of an oversized line, or
    /// `None` when more bytes are needed.
    pub fn next_line(&mut self) -> Option<Frame<'_>> {
        loop {
            let unread = &self.buf[self.start + self.scanned..];
            match memchr::memchr(b'\n', unread) {
                Some(i) => {
                    let end = self.start + self.scanned + i;
                    let line_start = self.start;
                    self.start = end + 1;
                    self.scanned = 0;
                    if self.discarding {
                        self.discarding = false;
                        continue;
                    }
                    let mut line = &self.buf[line_start..end];
                    if line.last() == Some(&b'\r') {
                        line = &line[..line.len() - 1];
                    }
                    if line.len() > self.max_line {
                        let cut = line.len().min(256);
                        return Some(Frame::TooLong {
                            prefix: &line[..cut],
                        });
                    }
                    return Some(Frame::Line(line));
                }
                None => {
                    let pending = self.buf.len() - self.start;
                    if self.discarding {
                        self.start = self.buf.len();
                        self.scanned = 0;
                        return None;
                    }
                    // One byte of slack for a `\r` before the `\n`.
                    if pending > self.max_line + 1 {
                        self.discarding = true;
                        let line_start = self.start;
                        self.start = self.buf.len();
                        self.scanned = 0;
                        let cut = pending.min(256);
                        return Some(Frame::TooLong {
                            prefix: &self.buf[line_start..line_start + cut],
                        });
                    }
                    self.scanned = pending;
                    return None;
                }
            }
        }
    }
}
