//! A real agent running in the test process on a socket in a temporary
//! directory, and connections to it through the C functions.

#![allow(dead_code)] // each test file uses its own part of the harness

use std::ffi::{CStr, CString, c_char};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};

use snaplock::*;
use snaplock_agent::{AgentConfig, spawn};

/// A running agent in a fresh temporary directory; stopped and removed on
/// drop.
pub struct TestAgent {
    agent: Option<snaplock_agent::Agent>,
    pub dir: PathBuf,
    pub socket: CString,
}

impl TestAgent {
    pub fn start() -> TestAgent {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let n = COUNT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("libsnaplock-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temporary directory");
        let path = dir.join("s.sock");
        let agent = spawn(AgentConfig::new(&path)).expect("the agent starts");
        let socket = CString::new(path.into_os_string().into_encoded_bytes()).expect("no NUL");
        TestAgent {
            agent: Some(agent),
            dir,
            socket,
        }
    }

    pub fn connect(&self) -> Conn {
        let mut raw = ptr::null_mut();
        // SAFETY: a NUL-terminated path and a writable out pointer.
        let r = unsafe { snaplock_connect(self.socket.as_ptr(), &mut raw) };
        assert_eq!(r, snaplock_result::Ok);
        assert!(!raw.is_null());
        Conn(raw)
    }

    pub fn stop(&mut self) {
        if let Some(agent) = self.agent.take() {
            agent.stop().expect("the agent stops cleanly");
        }
    }
}

impl Drop for TestAgent {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A connection, freed on drop.
pub struct Conn(pub *mut snaplock_conn);

impl Conn {
    /// What the last failed call said.
    pub fn last_error(&self) -> String {
        let mut buf = [0 as c_char; 512];
        // SAFETY: a live connection and a buffer of the given length.
        unsafe { snaplock_conn_last_error(self.0, buf.as_mut_ptr(), buf.len()) };
        // SAFETY: snaplock_conn_last_error NUL-terminates within the buffer.
        unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        // SAFETY: from snaplock_connect, freed once.
        unsafe { snaplock_conn_free(self.0) };
    }
}

/// Answers the first line a client sends on `path` with `reply(line)` and
/// hands the line back.
pub fn fake_agent(
    path: &std::path::Path,
    reply: fn(&str) -> String,
) -> std::thread::JoinHandle<String> {
    let listener = UnixListener::bind(path).expect("bind");
    std::thread::spawn(move || {
        let (stream, _) = listener.accept().expect("accept");
        let mut reader = BufReader::new(stream.try_clone().expect("clone"));
        let mut line = String::new();
        reader.read_line(&mut line).expect("a request line");
        (&stream)
            .write_all(reply(&line).as_bytes())
            .expect("the reply is written");
        line
    })
}
