//! The client socket: where it goes, stale sockets, permissions, removal.
//!
//! A socket file left by an agent that died is removed only after a
//! connection attempt proves nobody answers on it; one that answers belongs
//! to a running agent, and starting a second one would split the lock
//! table in two. On exit the file is removed only if it is still the one
//! this agent created, so a successor that already bound the path keeps it;
//! an agent that fails to start after binding removes it too.

use std::cell::Cell;
use std::fs::{self, DirBuilder, Permissions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use mio::net::{UnixListener, UnixStream};

use crate::AgentError;
use crate::config::AgentConfig;

/// The socket file this agent created; removed when dropped, unless
/// [`SocketFile::remove`] did it already.
#[derive(Debug)]
pub struct SocketFile {
    path: PathBuf,
    /// Device, inode and change time: an inode number alone may be reused
    /// by a file created after ours was removed.
    identity: (u64, u64, i64, i64),
    removed: Cell<bool>,
}

fn identity(m: &fs::Metadata) -> (u64, u64, i64, i64) {
    (m.dev(), m.ino(), m.ctime(), m.ctime_nsec())
}

impl SocketFile {
    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the file if it is still ours (once).
    pub fn remove(&self) {
        if self.removed.replace(true) {
            return;
        }
        match fs::symlink_metadata(&self.path) {
            Ok(m) if m.file_type().is_socket() && identity(&m) == self.identity => {
                if let Err(e) = fs::remove_file(&self.path) {
                    log::warn!("cannot remove the socket {}: {e}", self.path.display());
                }
            }
            Ok(_) => log::info!(
                "{} now belongs to another agent; leaving it",
                self.path.display()
            ),
            Err(_) => {}
        }
    }
}

impl Drop for SocketFile {
    /// A start that fails after the bind leaves no socket behind.
    fn drop(&mut self) {
        self.remove();
    }
}

fn io_error(context: String) -> impl FnOnce(io::Error) -> AgentError {
    move |source| AgentError::Io { context, source }
}

/// Creates the listening socket described by `cfg`.
pub fn bind(cfg: &AgentConfig) -> Result<(UnixListener, SocketFile), AgentError> {
    let path = &cfg.socket;
    if cfg.private_socket_dir {
        if let Some(dir) = path.parent() {
            prepare_private_dir(dir)?;
        }
    }
    remove_if_stale(path)?;
    let listener = UnixListener::bind(path).map_err(|e| {
        let hint = if e.kind() == io::ErrorKind::NotFound {
            " (does its directory exist?)"
        } else {
            ""
        };
        AgentError::Io {
            context: format!("cannot listen on {}{hint}", path.display()),
            source: e,
        }
    })?;
    let stat =
        || fs::symlink_metadata(path).map_err(io_error(format!("cannot stat {}", path.display())));
    // Ours from here: an error below drops it, and so removes it.
    let mut file = SocketFile {
        path: path.clone(),
        identity: identity(&stat()?),
        removed: Cell::new(false),
    };
    fs::set_permissions(path, Permissions::from_mode(cfg.socket_mode)).map_err(io_error(
        format!(
            "cannot set the mode of {} to {:o}",
            path.display(),
            cfg.socket_mode
        ),
    ))?;
    // Each change of mode or owner changes the file's change time.
    file.identity = identity(&stat()?);
    if let Some(gid) = cfg.socket_group {
        std::os::unix::fs::chown(path, None, Some(gid)).map_err(io_error(format!(
            "cannot give {} to group {gid}",
            path.display()
        )))?;
        file.identity = identity(&stat()?);
    }
    Ok((listener, file))
}

/// `/tmp/snaplock-<uid>`: created 0700 when missing; refused when another
/// user owns it or others may write in it, since whoever controls that
/// directory could put their own socket in the agent's place.
fn prepare_private_dir(dir: &Path) -> Result<(), AgentError> {
    let uid = nix::unistd::getuid().as_raw();
    match fs::symlink_metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => DirBuilder::new()
            .mode(0o700)
            .create(dir)
            .map_err(io_error(format!(
                "cannot create the socket directory {}",
                dir.display()
            ))),
        Err(e) => Err(AgentError::Io {
            context: format!("cannot stat {}", dir.display()),
            source: e,
        }),
        Ok(m) if !m.is_dir() || m.uid() != uid || m.mode() & 0o022 != 0 => {
            Err(AgentError::Config(format!(
                "refusing the socket directory {}: it must be a directory owned by uid {uid} and writable by its \
             owner only (found uid {}, mode {:o})",
                dir.display(),
                m.uid(),
                m.mode() & 0o7777
            )))
        }
        Ok(_) => Ok(()),
    }
}

/// Removes `path` when it is a socket nobody answers on.
fn remove_if_stale(path: &Path) -> Result<(), AgentError> {
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(AgentError::Io {
                context: format!("cannot stat {}", path.display()),
                source: e,
            });
        }
    };
    if !meta.file_type().is_socket() {
        return Err(AgentError::Config(format!(
            "{} exists and is not a socket; remove it or choose another --socket",
            path.display()
        )));
    }
    // Non-blocking: a live agent whose backlog is full answers WouldBlock
    // instead of holding this start-up forever.
    match UnixStream::connect(path) {
        Ok(_) => Err(AgentError::AlreadyRunning(path.to_owned())),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
            Err(AgentError::AlreadyRunning(path.to_owned()))
        }
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
            log::info!("removing the stale socket {}", path.display());
            fs::remove_file(path).map_err(io_error(format!(
                "cannot remove the stale socket {}",
                path.display()
            )))
        }
        Err(e) => Err(AgentError::Io {
            context: format!("cannot probe the existing socket {}", path.display()),
            source: e,
        }),
    }
}

/// Raises the soft limit on open files to the hard limit, so the agent can
/// hold as many client connections as the system allows it. Returns the
/// limits before and after.
pub fn raise_nofile_limit() -> io::Result<(u64, u64)> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    if soft < hard {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard)?;
    }
    Ok((soft, hard))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("snaplock-listen-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_missing_private_directory_is_created_owner_only() {
        let base = scratch("create");
        let dir = base.join("snaplock-test");
        prepare_private_dir(&dir).unwrap();
        let meta = fs::metadata(&dir).unwrap();
        assert!(meta.is_dir());
        assert_eq!(meta.mode() & 0o777, 0o700);
        prepare_private_dir(&dir).expect("an existing private directory is fine");
        fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn a_private_directory_others_may_write_in_is_refused() {
        let base = scratch("open");
        let dir = base.join("snaplock-test");
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, Permissions::from_mode(0o777)).unwrap();
        let e = prepare_private_dir(&dir).unwrap_err().to_string();
        assert!(e.contains("refusing the socket directory"), "{e}");
        fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn a_socket_is_bound_with_its_mode_and_removed_only_while_it_is_ours() {
        let base = scratch("bind");
        let mut cfg = AgentConfig::new(base.join("s.sock"));
        cfg.socket_mode = 0o640;
        let (listener, file) = bind(&cfg).unwrap();
        assert_eq!(fs::metadata(file.path()).unwrap().mode() & 0o777, 0o640);
        assert!(
            matches!(bind(&cfg), Err(AgentError::AlreadyRunning(_))),
            "a live listener is not stale"
        );
        drop(listener);
        // Somebody else's file now sits at the path: it is left alone.
        fs::remove_file(file.path()).unwrap();
        fs::write(file.path(), "not ours").unwrap();
        file.remove();
        assert!(file.path().exists());
        fs::remove_dir_all(&base).unwrap();
    }
}
