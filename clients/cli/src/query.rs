//! The one-request subcommands: `status`, `list`, `info`, `metrics`, `send`
//! (and `who`, in `who.rs`).

use std::io::{self, Write};
use std::time::Duration;

use snaplock_client::wire::{Message, encode_to_vec};
use snaplock_client::{Client, Error};

use crate::args::SendArgs;
use crate::exit;

/// After the first reply to `send`, more replies are printed until none
/// came for this long.
pub const SEND_QUIET: Duration = Duration::from_millis(250);
/// Most replies `send` prints after the first.
const SEND_MAX_LINES: usize = 10_000;

/// How long `list` and `who` wait for the answer: in a cluster the agent
/// gathers it from the leaders for up to their `peer_timeout` (2 s by
/// default).
pub const LIST_TIMEOUT: Duration = Duration::from_secs(10);

/// Reports a failed request on stderr and gives its exit status.
pub(crate) fn failed(what: &str, e: &Error) -> u8 {
    eprintln!("snaplock-cli: error: {what}: {e}");
    exit::of_error(e, exit::SOFTWARE)
}

/// Writes to stdout; a reader that went away (`| head`) ends quietly.
pub(crate) fn print(bytes: &[u8]) -> Result<(), u8> {
    let mut out = io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Err(exit::SOFTWARE),
        Err(e) => {
            eprintln!("snaplock-cli: error: cannot write the output: {e}");
            Err(exit::SOFTWARE)
        }
    }
}

/// `status`: `ready` (0) or `not ready` (1).
pub fn status(client: &mut Client) -> u8 {
    match client.status() {
        Ok(true) => print(b"ready\n").map_or_else(|code| code, |()| exit::OK),
        Ok(false) => print(b"not ready\n").map_or_else(|code| code, |()| exit::NOT_READY),
        Err(e) => failed("status", &e),
    }
}

/// `list`: the ticket lines as the agent wrote them; the leaders that
/// did not answer in time are named on stderr.
pub fn list(client: &mut Client) -> u8 {
    let reply = match client.request(&Message::new("LISTTICKETS"), LIST_TIMEOUT) {
        Ok(reply) => reply,
        Err(e) => return failed("list", &e),
    };
    let Some(list) = reply.get("list").filter(|_| reply.command == "TICKETLIST") else {
        let e = Error::Protocol(format!("unexpected reply {}", reply.command));
        return failed("list", &e);
    };
    if let Some(error) = reply.get_str("error") {
        let e = Error::Refused {
            error: error.to_owned(),
            description: reply.get_str("description").unwrap_or_default().to_owned(),
        };
        return failed("list", &e);
    }
    let mut list = String::from_utf8_lossy(list).into_owned();
    if !list.is_empty() && !list.ends_with('\n') {
        list.push('\n');
    }
    if let Some(missing) = reply.get_str("missing") {
        eprintln!(
            "snaplock-cli: warning: list: the names owned by these leaders are not listed (no answer in time): {missing}"
        );
    }
    print(list.as_bytes()).map_or_else(|code| code, |()| exit::OK)
}

/// `info`: one `name: value` line per parameter of `STATUS`, sorted by
/// name, but `peers`: one `peer ADDR: ...` line per member after them.
pub fn info(client: &mut Client) -> u8 {
    match client.info() {
        Ok(msg) => {
            let mut text = String::new();
            for (name, value) in msg.params().filter(|(n, _)| *n != "peers") {
                text.push_str(name);
                text.push_str(": ");
                text.push_str(&String::from_utf8_lossy(value));
                text.push('\n');
            }
            if let Some(peers) = msg.get("peers") {
                text.push_str(&peer_lines(&String::from_utf8_lossy(peers)));
            }
            print(text.as_bytes()).map_or_else(|code| code, |()| exit::OK)
        }
        Err(e) => failed("info", &e),
    }
}

/// `ADDR/NAME/STATE/HEARD/RTT,...` (snaplock(7), `INFO`) as lines such as
/// `peer 10.0.0.2:4040: name b, link up, heard 0.25 s ago, round trip 0.0012 s`.
pub fn peer_lines(peers: &str) -> String {
    let mut out = String::new();
    for peer in peers.split(',').filter(|p| !p.is_empty()) {
        let f: Vec<&str> = peer.split('/').collect();
        let [addr, name, state, heard, rtt] = f[..] else {
            out.push_str(&format!("peer {peer}\n"));
            continue;
        };
        let heard = if heard == "-" {
            "never heard".to_owned()
        } else {
            format!("heard {heard} s ago")
        };
        let rtt = if rtt == "-" {
            "round trip unknown".to_owned()
        } else {
            format!("round trip {rtt} s")
        };
        out.push_str(&format!(
            "peer {addr}: name {name}, link {state}, {heard}, {rtt}\n"
        ));
    }
    out
}

/// `metrics`: the exposition as the agent wrote it.
pub fn metrics(client: &mut Client) -> u8 {
    match client.metrics() {
        Ok(text) => print(text.as_bytes()).map_or_else(|code| code, |()| exit::OK),
        Err(e) => failed("metrics", &e),
    }
}

/// `send`: the line, then every reply: the first within `timeout`, the
/// others until [`SEND_QUIET`] passes without one.
pub fn send(client: &mut Client, args: &SendArgs) -> u8 {
    if let Err(e) = client.send_line(&args.line) {
        return failed("send", &e);
    }
    match client.recv(Some(args.timeout)) {
        Ok(Some(msg)) => {
            if let Err(code) = print(&encode_to_vec(&msg)) {
                return code;
            }
        }
        Ok(None) => {
            eprintln!(
                "snaplock-cli: error: send: no reply within {} s",
                args.timeout.as_secs_f64()
            );
            return exit::UNAVAILABLE;
        }
        Err(e) => return failed("send", &e),
    }
    for _ in 0..SEND_MAX_LINES {
        match client.recv(Some(SEND_QUIET)) {
            Ok(Some(msg)) => {
                if let Err(code) = print(&encode_to_vec(&msg)) {
                    return code;
                }
            }
            // Quiet, or the agent closed the connection after replying
            // (an oversized line): what came is the answer.
            Ok(None) | Err(Error::Closed) => break,
            Err(e) => return failed("send", &e),
        }
    }
    exit::OK
}

#[cfg(test)]
mod tests {
    #[test]
    fn each_peer_of_info_is_a_line_that_reads_as_a_sentence() {
        let lines = super::peer_lines("127.0.0.1:4041/b/up/0.25/0.0012,127.0.0.1:4042/-/down/-/-");
        assert_eq!(
            lines,
            "peer 127.0.0.1:4041: name b, link up, heard 0.25 s ago, round trip 0.0012 s\n\
             peer 127.0.0.1:4042: name -, link down, never heard, round trip unknown\n"
        );
    }
}
