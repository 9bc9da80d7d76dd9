//! What client connections and peer links share: the buffer of unsent
//! lines, one `read`, and `WRITABLE` interest only while lines wait.
//!
//! Lines are appended as the core emits them and written when the loop
//! flushes, so a burst of lines costs one `write`.

use std::io::{self, Read, Write};

use mio::event::Source;
use mio::{Interest, Registry, Token};
use snaplock_proto::wire::{Message, encode};

/// What one `read` gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadOutcome {
    /// This many bytes.
    Data(usize),
    /// Nothing more for now.
    WouldBlock,
    /// The peer will send nothing more (it may still be reading).
    Eof,
    /// The connection failed.
    Failed,
}

/// What flushing gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushOutcome {
    /// Everything queued is written.
    Empty,
    /// The socket is full; the rest waits for `WRITABLE`.
    Pending,
    /// The peer is gone (`EPIPE`, `ECONNRESET`, ...).
    Failed,
}

/// How much one flush writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writes {
    /// One `write`: a short one means the socket is full.
    One,
    /// Until everything is out or the socket says it is full.
    UntilFull,
}

/// Unsent lines: written from `start`, compacted when the written part is
/// at least half of the buffer.
#[derive(Debug)]
pub struct OutBuf {
    buf: Vec<u8>,
    start: usize,
    keep: usize,
}

impl OutBuf {
    /// An empty buffer; once written out, a buffer whose capacity grew
    /// past `keep` bytes is given back to the allocator, so one big reply
    /// does not pin its memory for the connection's life.
    pub fn new(keep: usize) -> OutBuf {
        OutBuf {
            buf: Vec::new(),
            start: 0,
            keep,
        }
    }

    /// Unsent bytes.
    pub fn pending(&self) -> usize {
        self.buf.len() - self.start
    }

    /// Appends a line.
    pub fn queue(&mut self, msg: &Message) {
        self.compact();
        encode(msg, &mut self.buf);
    }

    /// Appends bytes already encoded (whole lines).
    pub fn queue_bytes(&mut self, bytes: &[u8]) {
        self.compact();
        self.buf.extend_from_slice(bytes);
    }

    /// Drops what was written, once it is half the buffer.
    fn compact(&mut self) {
        if self.start > 0 && self.start * 2 >= self.buf.len() {
            self.buf.drain(..self.start);
            self.start = 0;
        }
    }

    /// Writes what is queued to `w` (retrying on `EINTR` only).
    pub fn flush(&mut self, w: &mut impl Write, writes: Writes) -> FlushOutcome {
        while self.pending() > 0 {
            match w.write(&self.buf[self.start..]) {
                Ok(0) => return FlushOutcome::Failed,
                Ok(n) => {
                    self.start += n;
                    if writes == Writes::One && self.pending() > 0 {
                        return FlushOutcome::Pending;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return FlushOutcome::Pending,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return FlushOutcome::Failed,
            }
        }
        self.buf.clear();
        self.start = 0;
        if self.buf.capacity() > self.keep {
            self.buf = Vec::new();
        }
        FlushOutcome::Empty
    }

    /// Drops what is queued: the connection is being closed abruptly.
    pub fn discard(&mut self) {
        self.buf = Vec::new();
        self.start = 0;
    }
}

/// One `read` from `r` into `buf` (retried only on `EINTR`).
pub fn read_once(r: &mut impl Read, buf: &mut [u8]) -> ReadOutcome {
    loop {
        match r.read(buf) {
            Ok(0) => return ReadOutcome::Eof,
            Ok(n) => return ReadOutcome::Data(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return ReadOutcome::WouldBlock,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return ReadOutcome::Failed,
        }
    }
}

/// Whether `WRITABLE` is registered besides `READABLE`: only while there is
/// something to write, since an always-writable socket would wake the loop
/// for nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteInterest(pub bool);

impl WriteInterest {
    /// Registers `WRITABLE` when `want` says so and it is not yet, or
    /// drops it when it is and `want` does not.
    pub fn update(
        &mut self,
        registry: &Registry,
        source: &mut impl Source,
        token: Token,
        want: bool,
    ) -> io::Result<()> {
        if want != self.0 {
            let interest = if want {
                Interest::READABLE | Interest::WRITABLE
            } else {
                Interest::READABLE
            };
            registry.reregister(source, token, interest)?;
            self.0 = want;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer that takes at most `room` bytes per call, then would block
    /// once `total` bytes are in.
    struct Narrow {
        got: Vec<u8>,
        room: usize,
        total: usize,
    }

    impl Write for Narrow {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            let n = b.len().min(self.room).min(self.total - self.got.len());
            if n == 0 {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            self.got.extend_from_slice(&b[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn one_write_stops_at_a_short_write_and_until_full_goes_on() {
        let mut out = OutBuf::new(1024);
        out.queue(&Message::new("LOCKREADY"));
        out.queue(&Message::new("NOLOCK"));
        let mut w = Narrow {
            got: Vec::new(),
            room: 4,
            total: 100,
        };
        assert_eq!(out.flush(&mut w, Writes::One), FlushOutcome::Pending);
        assert_eq!(w.got, b"LOCK");
        assert_eq!(out.flush(&mut w, Writes::UntilFull), FlushOutcome::Empty);
        assert_eq!(w.got, b"LOCKREADY\nNOLOCK\n");
        assert_eq!(out.pending(), 0);
    }

    #[test]
    fn a_full_writer_leaves_the_rest_and_compaction_keeps_the_order() {
        let mut out = OutBuf::new(1024);
        out.queue(&Message::new("AAAA"));
        out.queue(&Message::new("BBBB"));
        let mut w = Narrow {
            got: Vec::new(),
            room: 64,
            total: 6,
        };
        assert_eq!(out.flush(&mut w, Writes::UntilFull), FlushOutcome::Pending);
        assert_eq!(out.pending(), 4);
        // More than half is written: the next line compacts first.
        out.queue(&Message::new("CC"));
        w.total = 100;
        assert_eq!(out.flush(&mut w, Writes::UntilFull), FlushOutcome::Empty);
        assert_eq!(w.got, b"AAAA\nBBBB\nCC\n");
    }

    #[test]
    fn a_big_buffer_is_given_back_once_written() {
        let mut out = OutBuf::new(16);
        out.queue(&Message::new("TICKETLIST").with("list", vec![b'x'; 100]));
        let mut w = Narrow {
            got: Vec::new(),
            room: 1000,
            total: 1000,
        };
        assert_eq!(out.flush(&mut w, Writes::One), FlushOutcome::Empty);
        assert_eq!(out.buf.capacity(), 0);
    }
}
