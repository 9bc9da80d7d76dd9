//! The client socket: where it goes, stale sockets, permissions, removal.
//!
//! A socket file left by an agent that died is removed only after a
//! connection attempt proves nobody answers on it; one that answers belongs
//! to a running agent, and starting a second one would split the lock
//! table in two. On exit the file is removed only if it is still the one
//! this agent created, so a successor that already bound the path keeps it.

use std::fs::{self, DirBuilder, Permissions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use mio::net::{UnixListener, UnixStream};

use crate::AgentError;
use crate::config::AgentConfig;

/// The socket file this agent created.
#[derive(Debug)]
pub struct SocketFile {
    path: PathBuf,
    dev: u64,
    ino: u64,
}

impl SocketFile {
    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the file if it is still ours.
    pub fn remove(&self) {
        match fs::symlink_metadata(&self.path) {
            Ok(m) if m.dev() == self.dev && m.ino() == self.ino => {
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
    fs::set_permissions(path, Permissions::from_mode(cfg.socket_mode)).map_err(io_error(
        format!(
            "cannot set the mode of {} to {:o}",
            path.display(),
            cfg.socket_mode
        ),
    ))?;
    if let Some(gid) = cfg.socket_group {
        std::os::unix::fs::chown(path, None, Some(gid)).map_err(io_error(format!(
            "cannot give {} to group {gid}",
            path.display()
        )))?;
    }
    let meta =
        fs::symlink_metadata(path).map_err(io_error(format!("cannot stat {}", path.display())))?;
    Ok((
        listener,
        SocketFile {
            path: path.clone(),
            dev: meta.dev(),
            ino: meta.ino(),
        },
    ))
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
