//! A client connection's socket: the Unix socket of snaplock(7), or a TCP
//! connection of the snapcommunicator compatibility session
//! ([`crate::communicator`]). Both are read, written and polled alike, so
//! one connection type, one framer and one set of bounds serve both.

use std::io::{self, Read, Write};

use mio::event::Source;
use mio::net::{TcpStream, UnixStream};
use mio::{Interest, Registry, Token};

/// A client's socket.
#[derive(Debug)]
pub enum Stream {
    /// A connection to the client socket.
    Unix(UnixStream),
    /// A connection to `communicator_listen`.
    Tcp(TcpStream),
}

impl From<UnixStream> for Stream {
    fn from(s: UnixStream) -> Stream {
        Stream::Unix(s)
    }
}

impl From<TcpStream> for Stream {
    fn from(s: TcpStream) -> Stream {
        Stream::Tcp(s)
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(buf),
            Stream::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write(buf),
            Stream::Tcp(s) => s.write(buf),
        }
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write_vectored(bufs),
            Stream::Tcp(s) => s.write_vectored(bufs),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.flush(),
            Stream::Tcp(s) => s.flush(),
        }
    }
}

impl Source for Stream {
    fn register(&mut self, r: &Registry, token: Token, interest: Interest) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.register(r, token, interest),
            Stream::Tcp(s) => s.register(r, token, interest),
        }
    }

    fn reregister(&mut self, r: &Registry, token: Token, interest: Interest) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.reregister(r, token, interest),
            Stream::Tcp(s) => s.reregister(r, token, interest),
        }
    }

    fn deregister(&mut self, r: &Registry) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.deregister(r),
            Stream::Tcp(s) => s.deregister(r),
        }
    }
}
