//! systemd readiness notification (`sd_notify`), std only.
//!
//! With `Type=notify`, systemd passes a datagram socket in `$NOTIFY_SOCKET`
//! (a path, or an abstract name written with a leading `@`) and waits for
//! `READY=1` before it considers the service started; `STOPPING=1` tells
//! it the stop is under way. A failed notification is logged, never fatal:
//! the locks matter more than the supervisor's bookkeeping.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};

/// A connection to the service manager's notification socket.
#[derive(Debug)]
pub struct Notifier {
    socket: UnixDatagram,
    addr: SocketAddr,
    name: OsString,
}

impl Notifier {
    /// Prepares to notify `name` (the value of `$NOTIFY_SOCKET`).
    pub fn new(name: &OsStr) -> io::Result<Notifier> {
        let bytes = name.as_bytes();
        let addr = match bytes.strip_prefix(b"@") {
            Some(abstract_name) => SocketAddr::from_abstract_name(abstract_name)?,
            None => SocketAddr::from_pathname(name)?,
        };
        Ok(Notifier {
            socket: UnixDatagram::unbound()?,
            addr,
            name: name.to_owned(),
        })
    }

    /// Sends one state line such as `READY=1`.
    pub fn notify(&self, state: &str) {
        if let Err(e) = self.socket.send_to_addr(state.as_bytes(), &self.addr) {
            log::warn!(
                "cannot send {state} to the service manager at {:?}: {e}",
                self.name
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_reach_a_path_socket_and_an_abstract_one() {
        let dir = std::env::temp_dir().join(format!("snaplock-notify-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("notify");
        let listener = UnixDatagram::bind(&path).unwrap();
        Notifier::new(path.as_os_str()).unwrap().notify("READY=1");
        let mut buf = [0u8; 64];
        let n = listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1");

        let name = format!("snaplock-notify-test-{}", std::process::id());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let abstract_listener = UnixDatagram::bind_addr(&addr).unwrap();
        Notifier::new(OsStr::new(&format!("@{name}")))
            .unwrap()
            .notify("STOPPING=1");
        let n = abstract_listener.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"STOPPING=1");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
