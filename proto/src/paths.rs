//! Where the client socket is: one rule for the agent, the CLI and
//! `libsnaplock` (snaplock(7), TRANSPORT). Pure: the caller reads the environment and
//! the file system and passes what it found.

use std::path::PathBuf;

/// Where the Debian package's agent listens.
pub const RUN_DIR: &str = "/run/snaplock";
/// The socket's file name in [`RUN_DIR`] and in `$XDG_RUNTIME_DIR`.
pub const SOCKET_NAME: &str = "snaplock.sock";
/// The environment variable that names the socket.
pub const SOCKET_ENV: &str = "SNAPLOCK_SOCKET";

/// What the socket path is resolved from, in order of precedence.
#[derive(Debug, Default, Clone)]
pub struct SocketSources {
    /// `--socket` or `socket=` in the agent's configuration.
    pub explicit: Option<PathBuf>,
    /// `$SNAPLOCK_SOCKET`, when set and not empty.
    pub env_socket: Option<PathBuf>,
    /// Whether `/run/snaplock` exists and is a directory.
    pub run_dir_exists: bool,
    /// `$XDG_RUNTIME_DIR`, when set and not empty.
    pub xdg_runtime_dir: Option<PathBuf>,
    /// The real uid of the process.
    pub uid: u32,
}

/// The socket path: the explicit one; else `$SNAPLOCK_SOCKET`; else
/// `/run/snaplock/snaplock.sock` when that directory exists; else
/// `$XDG_RUNTIME_DIR/snaplock.sock`; else `/tmp/snaplock-<uid>/snaplock.sock`.
pub fn resolve_socket(sources: &SocketSources) -> PathBuf {
    let nonempty = |p: &Option<PathBuf>| p.clone().filter(|p| !p.as_os_str().is_empty());
    if let Some(p) = nonempty(&sources.explicit) {
        return p;
    }
    if let Some(p) = nonempty(&sources.env_socket) {
        return p;
    }
    if sources.run_dir_exists {
        return PathBuf::from(RUN_DIR).join(SOCKET_NAME);
    }
    if let Some(p) = nonempty(&sources.xdg_runtime_dir) {
        return p.join(SOCKET_NAME);
    }
    PathBuf::from(format!("/tmp/snaplock-{}", sources.uid)).join(SOCKET_NAME)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_source_wins_over_the_ones_after_it() {
        let mut s = SocketSources {
            explicit: Some("/a.sock".into()),
            env_socket: Some("/b.sock".into()),
            run_dir_exists: true,
            xdg_runtime_dir: Some("/run/user/7".into()),
            uid: 7,
        };
        assert_eq!(resolve_socket(&s), PathBuf::from("/a.sock"));
        s.explicit = None;
        assert_eq!(resolve_socket(&s), PathBuf::from("/b.sock"));
        s.env_socket = Some("".into());
        assert_eq!(
            resolve_socket(&s),
            PathBuf::from("/run/snaplock/snaplock.sock")
        );
        s.run_dir_exists = false;
        assert_eq!(
            resolve_socket(&s),
            PathBuf::from("/run/user/7/snaplock.sock")
        );
        s.xdg_runtime_dir = None;
        assert_eq!(
            resolve_socket(&s),
            PathBuf::from("/tmp/snaplock-7/snaplock.sock")
        );
    }
}
