//! One connection to an agent's socket, a request and its reply at a
//! time: what the load tools (`snaplock-load`, `snaplock-txbench`) drive.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// A connection that sends a line and reads the one reply.
pub struct LineConn {
    /// The socket, for writing (and for `SO_PEERCRED`).
    pub w: UnixStream,
    r: BufReader<UnixStream>,
    /// The last reply, its `\n` included.
    pub line: String,
}

impl LineConn {
    /// Connects to `path`; a reply that takes more than 30 s is an error.
    pub fn open(path: &Path) -> Result<LineConn, String> {
        let w = UnixStream::connect(path).map_err(|e| format!("{}: {e}", path.display()))?;
        w.set_read_timeout(Some(Duration::from_secs(30)))
            .map_err(|e| format!("set_read_timeout: {e}"))?;
        let r = BufReader::new(w.try_clone().map_err(|e| e.to_string())?);
        Ok(LineConn {
            w,
            r,
            line: String::new(),
        })
    }

    /// Sends one line and returns the reply's first word.
    pub fn ask(&mut self, line: &str) -> Result<&str, String> {
        self.w
            .write_all(line.as_bytes())
            .map_err(|e| format!("write: {e}"))?;
        self.line.clear();
        if self
            .r
            .read_line(&mut self.line)
            .map_err(|e| format!("read: {e}"))?
            == 0
        {
            return Err("the agent closed the connection".into());
        }
        Ok(self.line.split(' ').next().unwrap_or("").trim_end())
    }
}
