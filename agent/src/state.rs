//! The agent's record on disk: the largest epoch it adopted and a fence
//! reservation (`snaplock_proto::cluster::Persisted`), so that a restarted
//! agent never draws or adopts below what it knew (docs/cluster.md, S2).
//!
//! The file is `<state_dir>/<server_name>.state`, replaced atomically
//! (written to `.tmp`, `fsync`, renamed, directory `fsync`) each time the
//! core asks (`Output::Persist`): at each epoch change and each time the
//! fences pass the last reservation, not at each grant.
//!
//! While an agent runs it holds an exclusive `flock` on
//! `<state_dir>/<server_name>.state.lock`: a second agent of the same name
//! given the same directory does not start, since two agents writing one
//! record could each put it below what the other drew (S2).

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use snaplock_proto::cluster::Persisted;

use crate::AgentError;
use crate::files::{self, FileError};

/// The packaged state directory (`StateDirectory=snaplock` in the unit).
pub const VAR_LIB_DIR: &str = "/var/lib/snaplock";
/// The largest record read, in bytes: a record is a few dozen.
const MAX_RECORD: u64 = 4096;

/// Where the record is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateDir {
    /// Nowhere (agents inside tests): fences after a restart rest on the
    /// wall clocks alone.
    Off,
    /// `state_dir=` / `--state-dir`: it must be usable, or the agent does
    /// not start.
    Given(PathBuf),
    /// The defaults, in order; the first usable one is taken.
    Defaults(Vec<PathBuf>),
}

/// The default directories: `$STATE_DIRECTORY` (set by systemd's
/// `StateDirectory=`), `/var/lib/snaplock` when it exists, then
/// `$XDG_STATE_HOME/snaplock` or `~/.local/state/snaplock`.
pub fn default_dirs(
    state_directory: Option<&Path>,
    var_lib_exists: bool,
    xdg_state_home: Option<&Path>,
    home: Option<&Path>,
) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(d) = state_directory {
        // systemd gives a colon-separated list when a unit has several.
        let first = d
            .to_string_lossy()
            .split(':')
            .next()
            .unwrap_or("")
            .to_owned();
        if !first.is_empty() {
            dirs.push(PathBuf::from(first));
        }
    }
    if var_lib_exists {
        dirs.push(PathBuf::from(VAR_LIB_DIR));
    }
    match (xdg_state_home, home) {
        (Some(x), _) => dirs.push(x.join("snaplock")),
        (None, Some(h)) => dirs.push(h.join(".local/state/snaplock")),
        (None, None) => {}
    }
    dirs
}

/// Why a record could not be opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenError {
    /// The directory cannot be made, read or written: another may do.
    Unusable(String),
    /// A record is there but does not read: never replaced silently.
    Broken(String),
    /// Another running agent of the same name keeps its record there.
    Taken(String),
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::Unusable(e) | OpenError::Broken(e) | OpenError::Taken(e) => f.write_str(e),
        }
    }
}

/// The record's file, once opened.
#[derive(Debug)]
pub struct StateFile {
    dir: PathBuf,
    path: PathBuf,
    tmp: PathBuf,
    /// Held, never read: the record is this agent's while it lives.
    _lock: Flock<File>,
}

impl StateFile {
    /// Opens (creating the directory, 0750, when missing) the record of
    /// `server_name` in `dir`, reads it (nothing kept yet: zero), and
    /// writes it back to prove the directory writable.
    pub fn open(dir: &Path, server_name: &str) -> Result<(StateFile, Persisted), OpenError> {
        DirBuilder::new()
            .recursive(true)
            .mode(0o750)
            .create(dir)
            .map_err(|e| OpenError::Unusable(format!("cannot create {}: {e}", dir.display())))?;
        let lock_path = dir.join(format!("{server_name}.state.lock"));
        let lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o640)
            .open(&lock_path)
            .map_err(|e| {
                OpenError::Unusable(format!("cannot open {}: {e}", lock_path.display()))
            })?;
        let lock = Flock::lock(lock, FlockArg::LockExclusiveNonblock).map_err(|(_, e)| {
            if e == Errno::EWOULDBLOCK {
                OpenError::Taken(format!(
                    "another running snaplockd named {server_name} keeps its record in {}; \
                     give each agent of this computer its own server name or state_dir",
                    dir.display()
                ))
            } else {
                OpenError::Unusable(format!("cannot lock {}: {e}", lock_path.display()))
            }
        })?;
        let file = StateFile {
            dir: dir.to_owned(),
            path: dir.join(format!("{server_name}.state")),
            tmp: dir.join(format!("{server_name}.state.tmp")),
            _lock: lock,
        };
        let broken = |why: String| {
            OpenError::Broken(format!(
                "{}: not a snaplock record ({why}); restore it, or remove it if the fences of \
                 this cluster may start again from the wall clock",
                file.path.display()
            ))
        };
        let record = match files::read_regular(&file.path, MAX_RECORD) {
            Ok((bytes, _)) => {
                let text = String::from_utf8(bytes).map_err(|_| broken("not UTF-8".into()))?;
                Persisted::parse(&text).map_err(|e| broken(e.to_string()))?
            }
            Err(FileError::Io(e)) if e.kind() == io::ErrorKind::NotFound => Persisted::default(),
            Err(FileError::Io(e)) => {
                return Err(OpenError::Unusable(format!(
                    "cannot read {}: {e}",
                    file.path.display()
                )));
            }
            // Something else is there: never replaced silently.
            Err(e) => return Err(broken(e.to_string())),
        };
        file.save(&record).map_err(|e| {
            OpenError::Unusable(format!("cannot write {}: {e}", file.path.display()))
        })?;
        Ok((file, record))
    }

    /// Where the record is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Replaces the record durably: written to a temporary file, synced,
    /// renamed over the old one, and the directory synced.
    pub fn save(&self, record: &Persisted) -> io::Result<()> {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o640)
            .open(&self.tmp)?;
        f.write_all(record.to_text().as_bytes())?;
        f.sync_all()?;
        drop(f);
        fs::rename(&self.tmp, &self.path)?;
        File::open(&self.dir)?.sync_all()
    }
}

/// Opens the record where `dir` says; logs where it is kept, or why not.
pub fn open(
    dir: &StateDir,
    server_name: &str,
) -> Result<(Option<StateFile>, Persisted), AgentError> {
    let candidates = match dir {
        StateDir::Off => return Ok((None, Persisted::default())),
        StateDir::Given(d) => {
            return match StateFile::open(d, server_name) {
                Ok((file, record)) => {
                    log_kept(&file, &record);
                    Ok((Some(file), record))
                }
                Err(e) => Err(AgentError::Config(format!("state_dir: {e}"))),
            };
        }
        StateDir::Defaults(candidates) => candidates,
    };
    for d in candidates {
        match StateFile::open(d, server_name) {
            Ok((file, record)) => {
                log_kept(&file, &record);
                return Ok((Some(file), record));
            }
            Err(OpenError::Broken(e) | OpenError::Taken(e)) => {
                return Err(AgentError::Config(format!("state: {e}")));
            }
            Err(OpenError::Unusable(e)) => {
                log::warn!("state directory {} is not usable: {e}", d.display());
            }
        }
    }
    log::warn!(
        "no usable state directory (tried: {}): this agent keeps no record of its epoch and \
         fences, so after a restart they rest on the computers' wall clocks being in step; \
         set state_dir= or --state-dir",
        candidates
            .iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok((None, Persisted::default()))
}

fn log_kept(file: &StateFile, record: &Persisted) {
    if *record == Persisted::default() {
        log::info!(
            "record of epoch and fences kept in {} (new)",
            file.path().display()
        );
    } else {
        log::info!(
            "record of epoch and fences kept in {}: starting above {record}",
            file.path().display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("snaplock-state-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_record_survives_a_reopen() {
        let dir = temp("reopen");
        let (file, first) = StateFile::open(&dir.join("sub"), "web1").expect("opens");
        assert_eq!(first, Persisted::default());
        let r = Persisted {
            epoch: 1_700_000_000_000,
            fence: 1 << 60,
        };
        file.save(&r).expect("saved");
        drop(file);
        let (_, again) = StateFile::open(&dir.join("sub"), "web1").expect("opens");
        assert_eq!(again, r);
        assert!(!dir.join("sub/web1.state.tmp").exists());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_second_agent_of_the_same_name_does_not_share_the_record() {
        let dir = temp("taken");
        let (first, _) = open(&StateDir::Given(dir.clone()), "web1").expect("opens");
        for second in [
            StateDir::Given(dir.clone()),
            StateDir::Defaults(vec![dir.clone()]),
        ] {
            let e = open(&second, "web1").unwrap_err().to_string();
            assert!(
                e.contains("another running snaplockd named web1")
                    && e.contains(&*dir.to_string_lossy()),
                "{e}"
            );
        }
        // Another name in the same directory is another record.
        let (other, _) = open(&StateDir::Given(dir.clone()), "web2").expect("opens");
        assert!(other.is_some());
        // Once the first agent is gone, its record is free again.
        drop(first);
        let (again, _) = open(&StateDir::Given(dir.clone()), "web1").expect("opens");
        assert!(again.is_some());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_broken_record_stops_the_agent_with_its_path() {
        let dir = temp("broken");
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("web1.state"), "garbage").unwrap();
        let e = open(&StateDir::Given(dir.clone()), "web1")
            .unwrap_err()
            .to_string();
        assert!(e.contains("web1.state"), "{e}");
        // Among the defaults too: a record that cannot be read is never
        // silently replaced.
        let e = open(&StateDir::Defaults(vec![dir.clone()]), "web1")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a snaplock record"), "{e}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_fifo_or_a_huge_file_in_the_records_place_is_refused_at_once() {
        let dir = temp("fifo");
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("web1.state");
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        // On a thread: a FIFO opened for reading may wait for a writer.
        let (tx, rx) = std::sync::mpsc::channel();
        let given = StateDir::Given(dir.clone());
        std::thread::spawn(move || {
            tx.send(open(&given, "web1").map(|_| ()).map_err(|e| e.to_string()))
        });
        let e = rx
            .recv_timeout(std::time::Duration::from_secs(5))
            .expect("no wait on a FIFO")
            .unwrap_err();
        assert!(e.contains("not a regular file (a FIFO)"), "{e}");
        fs::remove_file(&path).unwrap();
        fs::write(&path, "x".repeat(1 << 20)).unwrap();
        let e = open(&StateDir::Given(dir.clone()), "web1")
            .unwrap_err()
            .to_string();
        assert!(e.contains("larger than 4096 bytes") && e.len() < 400, "{e}");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_unusable_default_falls_through_to_the_next() {
        let dir = temp("fallback");
        fs::create_dir_all(&dir).unwrap();
        let not_a_dir = dir.join("file");
        fs::write(&not_a_dir, "x").unwrap();
        let dirs = StateDir::Defaults(vec![not_a_dir.join("sub"), dir.join("ok")]);
        let (file, _) = open(&dirs, "web1").expect("starts");
        assert_eq!(file.expect("kept").path(), dir.join("ok/web1.state"));
        let (none, _) = open(&StateDir::Defaults(vec![not_a_dir.join("sub")]), "web1")
            .expect("starts without a record");
        assert!(none.is_none());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_defaults_follow_systemd_then_the_package_then_the_user() {
        let dirs = default_dirs(
            Some(Path::new("/var/lib/snaplock:/var/lib/other")),
            true,
            None,
            Some(Path::new("/home/u")),
        );
        assert_eq!(
            dirs,
            [
                PathBuf::from("/var/lib/snaplock"),
                PathBuf::from("/var/lib/snaplock"),
                PathBuf::from("/home/u/.local/state/snaplock"),
            ]
        );
        let dirs = default_dirs(None, false, Some(Path::new("/x")), Some(Path::new("/h")));
        assert_eq!(dirs, [PathBuf::from("/x/snaplock")]);
    }
}
