//! `metrics_listen`: `GET /metrics` for Prometheus, served from the loop.
//!
//! Each connection asks once and is answered once, then closed
//! (`Connection: close`):
//!
//! ```text
//!  accepted ──request complete──▶ Writing ──written──▶ closed
//!     │   (httparse: GET /metrics: 200, another path: 404,
//!     │    another method: 405, malformed: 400, too long: 431)
//!     └── READ_DEADLINE without a whole request, EOF, error ──▶ closed
//!  Writing ── WRITE_DEADLINE ──▶ closed
//! ```
//!
//! Everything is bounded: [`MAX_CONNECTIONS`] at once (one more is closed
//! at once), [`MAX_REQUEST`] bytes of request, a deadline to send it and
//! one to read the answer. The body is the core's exposition
//! ([`snaplock_proto::Core::metrics_text`]), the same text as the
//! `METRICS` command's.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::time::Duration;

use mio::net::{TcpListener, TcpStream};
use mio::{Interest, Registry, Token};
use snaplock_proto::{Now, Time};

/// The listener's token.
pub(crate) const LISTENER: Token = Token(7);
/// Connection tokens: above the clients', below the peers' (`1 << 40`).
const FIRST_TOKEN: usize = 1 << 39;
/// Most connections at once: a scraper needs one.
pub const MAX_CONNECTIONS: usize = 16;
/// Longest request (line and headers), in bytes.
pub const MAX_REQUEST: usize = 8 << 10;
/// How long a connection may take to send its request.
pub const READ_DEADLINE: Duration = Duration::from_secs(3);
/// How long a connection may take to read its answer.
pub const WRITE_DEADLINE: Duration = Duration::from_secs(10);
/// Most headers a request may have.
const MAX_HEADERS: usize = 64;
/// Accepts per event: the rest wait in the backlog.
const ACCEPT_BUDGET: usize = 64;
/// What is read of a request after its answer, at most, so that closing
/// does not reset the connection before the client reads the answer.
const DISCARD: usize = 64 << 10;

/// The media type of the text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Whether `token` is one of this server's connections.
pub(crate) fn owns(token: Token) -> bool {
    (FIRST_TOKEN..FIRST_TOKEN << 1).contains(&token.0)
}

/// What a request gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// `200`, with the exposition.
    Metrics,
    /// `400`: not HTTP.
    BadRequest,
    /// `404`: another path.
    NotFound,
    /// `405`: another method (`Allow: GET`).
    MethodNotAllowed,
    /// `431`: longer than [`MAX_REQUEST`].
    TooLarge,
}

/// What the request read so far asks, or `None` while it is incomplete.
pub fn judge(request: &[u8]) -> Option<Answer> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(request) {
        Ok(httparse::Status::Complete(_)) => {
            let path = req.path.unwrap_or_default();
            let path = path.split_once('?').map_or(path, |(p, _)| p);
            Some(if req.method != Some("GET") {
                Answer::MethodNotAllowed
            } else if path != "/metrics" {
                Answer::NotFound
            } else {
                Answer::Metrics
            })
        }
        Ok(httparse::Status::Partial) if request.len() > MAX_REQUEST => Some(Answer::TooLarge),
        Ok(httparse::Status::Partial) => None,
        Err(httparse::Error::TooManyHeaders) => Some(Answer::TooLarge),
        Err(_) => Some(Answer::BadRequest),
    }
}

/// The whole response to `answer`; `body` is the exposition for
/// [`Answer::Metrics`].
pub fn response(answer: Answer, body: &str) -> Vec<u8> {
    let (status, extra, text) = match answer {
        Answer::Metrics => ("200 OK", "", body),
        Answer::BadRequest => ("400 Bad Request", "", "malformed request\n"),
        Answer::NotFound => ("404 Not Found", "", "not found: GET /metrics\n"),
        Answer::MethodNotAllowed => (
            "405 Method Not Allowed",
            "Allow: GET\r\n",
            "method not allowed: GET /metrics\n",
        ),
        Answer::TooLarge => (
            "431 Request Header Fields Too Large",
            "",
            "request too large\n",
        ),
    };
    let kind = if answer == Answer::Metrics {
        CONTENT_TYPE
    } else {
        "text/plain; charset=utf-8"
    };
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n",
        text.len()
    )
    .into_bytes();
    out.extend_from_slice(text.as_bytes());
    out
}

/// One connection.
#[derive(Debug)]
struct HttpConn {
    stream: TcpStream,
    request: Vec<u8>,
    /// Set once the request is judged: what is left to write from `written`.
    response: Option<Vec<u8>>,
    written: usize,
    deadline: Time,
}

/// The listener and its connections.
#[derive(Debug)]
pub(crate) struct MetricsServer {
    listener: TcpListener,
    conns: BTreeMap<u64, HttpConn>,
    next_id: u64,
    /// The accept budget ran out with connections perhaps still in the
    /// backlog: no new event will say so (edge-triggered), so the loop
    /// accepts again at its next turn.
    accept_again: bool,
}

impl MetricsServer {
    /// Listens on `addr` and watches the listener.
    pub(crate) fn bind(registry: &Registry, addr: SocketAddr) -> io::Result<MetricsServer> {
        let mut listener = TcpListener::bind(addr)?;
        registry.register(&mut listener, LISTENER, Interest::READABLE)?;
        Ok(MetricsServer {
            listener,
            conns: BTreeMap::new(),
            next_id: 0,
            accept_again: false,
        })
    }

    /// Stops listening and closes every connection.
    pub(crate) fn stop(mut self, registry: &Registry) {
        let _ = registry.deregister(&mut self.listener);
        for (_, mut c) in std::mem::take(&mut self.conns) {
            let _ = registry.deregister(&mut c.stream);
        }
    }

    /// Accepts what the backlog has, within [`ACCEPT_BUDGET`]; a
    /// connection past [`MAX_CONNECTIONS`] is closed at once.
    pub(crate) fn accept(&mut self, registry: &Registry, now: Now) {
        self.accept_again = true;
        for _ in 0..ACCEPT_BUDGET {
            let mut stream = match self.listener.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.accept_again = false;
                    return;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => continue,
                Err(e) => {
                    // Out of descriptors: the backlog keeps it; the next
                    // connection's event tries again.
                    log::warn!("metrics_listen: cannot accept: {e}");
                    self.accept_again = false;
                    return;
                }
            };
            if self.conns.len() >= MAX_CONNECTIONS {
                log::debug!("metrics_listen: {MAX_CONNECTIONS} connections already: one closed");
                continue;
            }
            let id = self.next_id;
            self.next_id += 1;
            let token = Token(FIRST_TOKEN + (id as usize % FIRST_TOKEN));
            let interest = Interest::READABLE | Interest::WRITABLE;
            if let Err(e) = registry.register(&mut stream, token, interest) {
                log::warn!("metrics_listen: cannot watch a connection: {e}");
                continue;
            }
            let conn = HttpConn {
                stream,
                request: Vec::new(),
                response: None,
                written: 0,
                deadline: now.mono + READ_DEADLINE,
            };
            self.conns.insert(id, conn);
        }
    }

    /// An event on a connection: read its request, answer it with
    /// `render`'s exposition when it asks for it, write.
    pub(crate) fn event(
        &mut self,
        registry: &Registry,
        now: Now,
        token: Token,
        render: impl FnOnce() -> String,
    ) {
        let id = (token.0 - FIRST_TOKEN) as u64;
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        let done = match conn.progress(now, render) {
            Ok(done) => done,
            Err(e) => {
                log::debug!("metrics_listen: connection closed: {e}");
                true
            }
        };
        if done {
            self.close(registry, id);
        }
    }

    /// Whether connections may wait in the backlog ([`Self::accept`] again).
    pub(crate) fn accept_again(&self) -> bool {
        self.accept_again
    }

    /// When the earliest connection's deadline falls.
    pub(crate) fn next_deadline(&self) -> Option<Time> {
        self.conns.values().map(|c| c.deadline).min()
    }

    /// Closes the connections whose deadline passed.
    pub(crate) fn handle_timeout(&mut self, registry: &Registry, now: Now) {
        let late: Vec<u64> = (self.conns.iter())
            .filter(|(_, c)| c.deadline <= now.mono)
            .map(|(id, _)| *id)
            .collect();
        for id in late {
            log::debug!("metrics_listen: a connection took too long: closed");
            self.close(registry, id);
        }
    }

    fn close(&mut self, registry: &Registry, id: u64) {
        if let Some(mut c) = self.conns.remove(&id) {
            let _ = registry.deregister(&mut c.stream);
            let _ = c.stream.shutdown(Shutdown::Both);
        }
    }
}

impl HttpConn {
    /// Reads and writes what the socket allows; true when finished.
    fn progress(&mut self, now: Now, render: impl FnOnce() -> String) -> io::Result<bool> {
        if self.response.is_none() {
            let mut buf = [0u8; 4096];
            let answer = loop {
                match self.stream.read(&mut buf) {
                    Ok(0) => return Ok(true), // gone before asking
                    Ok(n) => {
                        self.request.extend_from_slice(&buf[..n]);
                        if let Some(answer) = judge(&self.request) {
                            break answer;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            };
            let body = if answer == Answer::Metrics {
                render()
            } else {
                String::new()
            };
            self.response = Some(response(answer, &body));
            self.request = Vec::new();
            self.deadline = now.mono + WRITE_DEADLINE;
        }
        let response = self.response.as_deref().unwrap_or_default();
        while self.written < response.len() {
            match self.stream.write(&response[self.written..]) {
                Ok(0) => return Ok(true),
                Ok(n) => self.written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.discard();
        Ok(true)
    }

    /// Reads what the client sent beyond its request (a body, the rest of
    /// a request too large), within [`DISCARD`]: a socket closed with
    /// unread bytes resets the connection, and the client may then lose
    /// the answer.
    fn discard(&mut self) {
        let _ = self.stream.shutdown(Shutdown::Write);
        let mut buf = [0u8; 4096];
        let mut left = DISCARD;
        while left > 0 {
            match self.stream.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_get_of_the_metrics_path_is_answered_with_the_metrics() {
        let ask = |r: &str| judge(r.as_bytes());
        assert_eq!(
            ask("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
            Some(Answer::Metrics)
        );
        assert_eq!(
            ask("GET /metrics?x=1 HTTP/1.0\r\n\r\n"),
            Some(Answer::Metrics)
        );
        assert_eq!(ask("GET / HTTP/1.1\r\n\r\n"), Some(Answer::NotFound));
        assert_eq!(
            ask("POST /metrics HTTP/1.1\r\n\r\n"),
            Some(Answer::MethodNotAllowed)
        );
        assert_eq!(ask("GET /metrics HTTP/1.1\r\nHost"), None);
        assert_eq!(ask("\x01\x02 nonsense\r\n\r\n"), Some(Answer::BadRequest));
    }

    #[test]
    fn a_request_too_long_or_with_too_many_headers_is_refused() {
        let mut long = b"GET /metrics HTTP/1.1\r\nX: ".to_vec();
        long.resize(MAX_REQUEST + 1, b'a');
        assert_eq!(judge(&long), Some(Answer::TooLarge));
        let mut many = "GET /metrics HTTP/1.1\r\n".to_owned();
        for i in 0..=MAX_HEADERS {
            many.push_str(&format!("H{i}: v\r\n"));
        }
        many.push_str("\r\n");
        assert_eq!(judge(many.as_bytes()), Some(Answer::TooLarge));
    }

    #[test]
    fn a_refusal_says_why_and_a_405_names_the_method_allowed() {
        let r = String::from_utf8(response(Answer::MethodNotAllowed, "")).unwrap();
        assert!(r.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"), "{r}");
        assert!(r.contains("\r\nAllow: GET\r\n"), "{r}");
        let ok = String::from_utf8(response(Answer::Metrics, "a 1\n")).unwrap();
        assert!(
            ok.contains("Content-Type: text/plain; version=0.0.4"),
            "{ok}"
        );
        assert!(
            ok.ends_with("Content-Length: 4\r\nConnection: close\r\n\r\na 1\n"),
            "{ok}"
        );
    }

    #[test]
    fn the_connection_tokens_are_neither_the_clients_nor_the_peers() {
        assert!(owns(Token(FIRST_TOKEN)));
        assert!(!owns(Token(1 << 40)));
        assert!(!owns(Token(16)));
        assert!(!owns(LISTENER));
    }
}
