//! The files the agent reads (its configuration, the cluster's secret):
//! regular files of a bounded size, and nothing else.
//!
//! A path may name a FIFO, whose `open` blocks until a writer comes and
//! whose reads may never end, or a device such as `/dev/zero` that never
//! ends either: either would hang the agent or fill its memory. So the file
//! is checked before it is opened, opened without blocking, checked again
//! (it may have been replaced in between), and read up to its bound only.

use std::fmt;
use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// Why a file was not read.
#[derive(Debug)]
pub enum FileError {
    /// The system refused (no such file, permission denied...).
    Io(io::Error),
    /// A directory, a FIFO, a device or a socket.
    NotRegular(&'static str),
    /// More than the bound, in bytes.
    TooLarge(u64),
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FileError::Io(e) => write!(f, "{e}"),
            FileError::NotRegular(kind) => write!(f, "not a regular file (a {kind})"),
            FileError::TooLarge(max) => write!(f, "larger than {max} bytes"),
        }
    }
}

impl std::error::Error for FileError {}

fn kind_of(meta: &Metadata) -> Option<&'static str> {
    let t = meta.file_type();
    if t.is_file() {
        None
    } else if t.is_dir() {
        Some("directory")
    } else if t.is_fifo() {
        Some("FIFO")
    } else if t.is_char_device() {
        Some("character device")
    } else if t.is_block_device() {
        Some("block device")
    } else if t.is_socket() {
        Some("socket")
    } else {
        Some("special file")
    }
}

/// Reads the regular file at `path` (symbolic links followed), at most
/// `max` bytes; also returns its metadata.
pub fn read_regular(path: &Path, max: u64) -> Result<(Vec<u8>, Metadata), FileError> {
    // Checked before opening: opening some devices does something.
    let before = std::fs::metadata(path).map_err(FileError::Io)?;
    if let Some(kind) = kind_of(&before) {
        return Err(FileError::NotRegular(kind));
    }
    // O_NONBLOCK: should a FIFO have taken the file's place since, the
    // open does not wait for a writer, and the check below refuses it.
    let file: File = OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
        .open(path)
        .map_err(FileError::Io)?;
    let meta = file.metadata().map_err(FileError::Io)?;
    if let Some(kind) = kind_of(&meta) {
        return Err(FileError::NotRegular(kind));
    }
    if meta.len() > max {
        return Err(FileError::TooLarge(max));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    // One byte more than allowed tells a file that grew past the bound.
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(FileError::Io)?;
    if bytes.len() as u64 > max {
        return Err(FileError::TooLarge(max));
    }
    Ok((bytes, meta))
}

/// `value` for an error message: quoted, and cut after a few dozen
/// characters, so that a huge value does not make a huge message.
pub fn shown(value: &str) -> String {
    const SHOWN: usize = 64;
    if value.len() <= SHOWN {
        return format!("{value:?}");
    }
    let mut end = SHOWN;
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    format!("{:?}... ({} bytes)", &value[..end], value.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(tag: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("sla-files-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_regular_file_within_the_bound_is_read_whole() {
        let dir = temp("ok");
        let path = dir.join("f");
        std::fs::write(&path, b"abc\n").unwrap();
        assert_eq!(read_regular(&path, 4).unwrap().0, b"abc\n");
        assert!(matches!(
            read_regular(&path, 3),
            Err(FileError::TooLarge(3))
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_fifo_a_device_or_a_directory_is_refused_without_waiting() {
        let dir = temp("fifo");
        let fifo = dir.join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        for (path, kind) in [
            (fifo.as_path(), "FIFO"),
            (Path::new("/dev/zero"), "character device"),
            (dir.as_path(), "directory"),
        ] {
            match read_regular(path, 1 << 20) {
                Err(FileError::NotRegular(k)) => assert_eq!(k, kind, "{}", path.display()),
                other => panic!("{}: {other:?}", path.display()),
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn long_values_are_cut_in_messages() {
        assert_eq!(shown("abc"), "\"abc\"");
        let long = "é".repeat(1000);
        let s = shown(&long);
        assert!(s.len() < 100, "{s}");
        assert!(s.ends_with("... (2000 bytes)"), "{s}");
    }
}
