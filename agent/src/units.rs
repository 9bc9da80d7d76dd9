//! Clients' cgroups, for locks owned by a unit (`LOCK …;owner=cgroup`,
//! snaplock(7)).
//!
//! When a client connects, its pid (SO_PEERCRED) leads to its cgroup v2
//! path (the `0::` line of `/proc/PID/cgroup`), under the cgroup2 mount
//! found once at start in `/proc/self/mountinfo` (`/sys/fs/cgroup` on a
//! pure v2 computer, often `/sys/fs/cgroup/unified` on a hybrid one). The
//! cgroup is named by its directory's inode, which the core keeps
//! (`Credentials::cgroup`); the connection keeps the directory, for the
//! watch. Without a cgroup2 mount, for a client in the root cgroup (which
//! never empties) or one that is gone before its cgroup is read, there is
//! none, and the core refuses `owner=cgroup` with `error=invalid`.
//!
//! A watched cgroup's `cgroup.events` is watched with inotify: the kernel
//! modifies it when `populated` changes, and removes it with the
//! directory. The watch is set before the file is read, so a cgroup that
//! empties meanwhile is still seen: either the read says `populated 0`,
//! or the change comes as an event. Anything that goes wrong with a watch
//! counts as empty (the lock is released and its holder told), so no lock
//! is kept that only its lease would end; nothing here stops the agent.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};
use nix::errno::Errno;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};
use snaplock_proto::Time;

use crate::logging::RateLimit;

/// The inotify descriptor's token.
pub(crate) const TOKEN: Token = Token(4);
/// Reads of the inotify descriptor per call: each returns what fits in a
/// page, and cgroups change `populated` rarely; what is left is read at the
/// next iteration.
const READS_PER_CALL: usize = 16;

/// A client's cgroup: its directory's inode, and the directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cgroup {
    /// The inode, which the core names it by.
    pub inode: u64,
    /// The directory, for the watch.
    pub dir: PathBuf,
}

/// The cgroup2 mount: where it is, and which cgroup its root is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Its mount point.
    pub point: PathBuf,
    /// The cgroup path of its root (`/` unless a subtree was mounted).
    pub root: String,
}

/// The first cgroup2 mount in `/proc/self/mountinfo`'s text.
pub fn find_mount(mountinfo: &str) -> Option<Mount> {
    mountinfo.lines().find_map(|line| {
        // id parent major:minor root point options [optional...] - type source super
        let (fields, rest) = line.split_once(" - ")?;
        if rest.split(' ').next()? != "cgroup2" {
            return None;
        }
        let mut f = fields.split(' ');
        let root = unescape(f.nth(3)?);
        let point = unescape(f.next()?);
        Some(Mount {
            point: PathBuf::from(point),
            root,
        })
    })
}

/// mountinfo writes space, tab, newline and backslash as `\ooo`.
fn unescape(field: &str) -> String {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (b[i], octal) {
            (b'\\', Some(d)) => {
                out.push(d.iter().fold(0u8, |n, c| n.wrapping_mul(8) + (c - b'0')));
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The cgroup v2 path in `/proc/PID/cgroup`'s text (its `0::` line).
pub fn unified_path(proc_cgroup: &str) -> Option<&str> {
    proc_cgroup.lines().find_map(|l| l.strip_prefix("0::"))
}

/// The directory of cgroup `path` under `mount`; `None` for the root
/// cgroup, which never empties, and for a path outside the mount or this
/// agent's cgroup namespace (`/..`).
pub fn dir_of(mount: &Mount, path: &str) -> Option<PathBuf> {
    let below = if mount.root == "/" {
        path
    } else {
        path.strip_prefix(mount.root.as_str())
            .filter(|r| r.starts_with('/'))?
    };
    let rel = below.strip_prefix('/')?;
    if rel.is_empty()
        || rel
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return None;
    }
    Some(mount.point.join(rel))
}

/// What `cgroup.events` says: `Some(true)` while a process is in the
/// cgroup or below it, `None` when it does not say.
pub fn populated(events: &str) -> Option<bool> {
    events
        .lines()
        .find_map(|l| match l.strip_prefix("populated ")? {
            "0" => Some(false),
            "1" => Some(true),
            _ => None,
        })
}

/// The cgroups of clients, and the watches of those that own locks.
pub(crate) struct Units {
    mount: Mount,
    inotify: Inotify,
    by_wd: HashMap<WatchDescriptor, u64>,
    by_unit: HashMap<u64, (WatchDescriptor, PathBuf)>,
    /// The descriptor was left with events to read.
    pub(crate) more: bool,
    errors: RateLimit,
}

impl Units {
    /// Finds the cgroup2 mount and sets up inotify; `None` (said in the
    /// log) when either is missing: `owner=cgroup` is then refused.
    pub(crate) fn new(registry: &Registry) -> Option<Units> {
        let mount = match std::fs::read_to_string("/proc/self/mountinfo") {
            Ok(text) => find_mount(&text),
            Err(e) => {
                log::info!("cannot read /proc/self/mountinfo ({e}): owner=cgroup is refused");
                return None;
            }
        };
        let Some(mount) = mount else {
            log::info!("no cgroup v2 mount: owner=cgroup is refused");
            return None;
        };
        let inotify = match Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC) {
            Ok(i) => i,
            Err(e) => {
                log::warn!("cannot set up inotify ({e}): owner=cgroup is refused");
                return None;
            }
        };
        let fd = inotify.as_fd().as_raw_fd();
        if let Err(e) = registry.register(&mut SourceFd(&fd), TOKEN, Interest::READABLE) {
            log::warn!("cannot watch inotify ({e}): owner=cgroup is refused");
            return None;
        }
        log::debug!("cgroup v2 at {}", mount.point.display());
        Some(Units {
            mount,
            inotify,
            by_wd: HashMap::new(),
            by_unit: HashMap::new(),
            more: false,
            errors: RateLimit::new(),
        })
    }

    /// The cgroup of process `pid`, read now. `None` for a process gone
    /// already (the connection then has no cgroup), in the root cgroup, or
    /// moved out of this agent's view.
    pub(crate) fn of_pid(&self, pid: u32) -> Option<Cgroup> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
        let dir = dir_of(&self.mount, unified_path(&text)?)?;
        let inode = std::fs::metadata(&dir).ok()?.ino();
        Some(Cgroup { inode, dir })
    }

    /// Starts watching `unit`, whose directory is `dir` (`None`: the
    /// connection that named it is gone). Returns whether it is to be
    /// reported empty at once: it is, or it cannot be watched.
    pub(crate) fn watch(&mut self, now: Time, unit: u64, dir: Option<&Path>) -> bool {
        if self.by_unit.contains_key(&unit) {
            return false;
        }
        let Some(dir) = dir else {
            self.complain(now, unit, "the connection that named it is gone");
            return true;
        };
        let events = dir.join("cgroup.events");
        let mask = AddWatchFlags::IN_MODIFY | AddWatchFlags::IN_DELETE_SELF;
        let wd = match self.inotify.add_watch(&events, mask) {
            Ok(wd) => wd,
            Err(Errno::ENOENT) => return true, // removed: it was empty
            Err(e) => {
                self.complain(
                    now,
                    unit,
                    &format!("cannot watch {}: {e}", events.display()),
                );
                return true;
            }
        };
        // The directory may have been replaced since the client connected:
        // a new cgroup of the same name is not the one that owns the lock.
        if std::fs::metadata(dir).map(|m| m.ino()).ok() != Some(unit) {
            let _ = self.inotify.rm_watch(wd);
            return true;
        }
        if let Some(other) = self.by_wd.insert(wd, unit) {
            // Two inodes, one file: cannot be; keep the older watch.
            self.by_wd.insert(wd, other);
            self.complain(now, unit, "its watch is another cgroup's");
            return true;
        }
        self.by_unit.insert(unit, (wd, events));
        log::debug!("watching cgroup {unit} ({})", dir.display());
        if self.still_populated(unit) {
            return false;
        }
        self.unwatch(unit);
        true
    }

    /// Stops watching `unit` (nothing if it is not watched).
    pub(crate) fn unwatch(&mut self, unit: u64) {
        if let Some((wd, _)) = self.by_unit.remove(&unit) {
            self.by_wd.remove(&wd);
            // It fails when the kernel removed the watch already.
            let _ = self.inotify.rm_watch(wd);
        }
    }

    /// Reads what inotify says; returns the cgroups found empty, each
    /// once, no longer watched.
    pub(crate) fn read(&mut self, now: Time) -> Vec<u64> {
        let mut check = Vec::new();
        let mut overflow = false;
        self.more = true;
        for _ in 0..READS_PER_CALL {
            match self.inotify.read_events() {
                Ok(events) => {
                    for ev in events {
                        if ev.mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
                            overflow = true;
                        } else if let Some(&unit) = self.by_wd.get(&ev.wd) {
                            if ev.mask.intersects(
                                AddWatchFlags::IN_IGNORED | AddWatchFlags::IN_DELETE_SELF,
                            ) {
                                // The file went with its directory, which can
                                // only be removed once empty.
                                self.by_wd.remove(&ev.wd);
                                self.by_unit.remove(&unit);
                                check.push((unit, true));
                            } else {
                                check.push((unit, false));
                            }
                        }
                    }
                }
                Err(Errno::EAGAIN) => {
                    self.more = false;
                    break;
                }
                Err(Errno::EINTR) => {}
                Err(e) => {
                    if let Some(quiet) = self.errors.allow(now) {
                        log::error!(
                            "cannot read inotify: {e} ({quiet} more such errors not logged)"
                        );
                    }
                    // Read again at the next event, not in a tight loop.
                    self.more = false;
                    break;
                }
            }
        }
        if overflow {
            // Events were dropped: every watched cgroup is read again.
            log::warn!("inotify queue overflow: reading every watched cgroup again");
            check.extend(self.by_unit.keys().map(|&u| (u, false)));
        }
        let mut empty = Vec::new();
        for (unit, gone) in check {
            if empty.contains(&unit) {
                continue;
            }
            if gone || !self.still_populated(unit) {
                self.unwatch(unit);
                empty.push(unit);
            }
        }
        empty
    }

    /// Whether watched `unit` still has a process; a file that cannot be
    /// read any more is a cgroup that is gone.
    fn still_populated(&self, unit: u64) -> bool {
        let Some((_, events)) = self.by_unit.get(&unit) else {
            return false;
        };
        match std::fs::read_to_string(events) {
            Ok(text) => populated(&text).unwrap_or(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => false,
            Err(e) => {
                log::warn!("cannot read {}: {e}; taken as empty", events.display());
                false
            }
        }
    }

    fn complain(&mut self, now: Time, unit: u64, why: &str) {
        if let Some(quiet) = self.errors.allow(now) {
            log::warn!(
                "cannot watch cgroup {unit} ({why}): its locks are released \
                 ({quiet} more such errors not logged)"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw
";

    #[test]
    fn the_cgroup2_mount_is_found_among_v1_ones() {
        let m = find_mount(HYBRID).expect("a cgroup2 mount");
        assert_eq!(m.point, Path::new("/sys/fs/cgroup/unified"));
        assert_eq!(m.root, "/");
        assert_eq!(find_mount(&HYBRID[..HYBRID.find("41 31").unwrap()]), None);
    }

    #[test]
    fn escaped_mount_points_are_unescaped() {
        let m = find_mount("7 1 0:9 /a\\040b /mnt/c\\134g - cgroup2 none rw\n").expect("a mount");
        assert_eq!(m.root, "/a b");
        assert_eq!(m.point, Path::new("/mnt/c\\g"));
    }

    #[test]
    fn the_unified_line_gives_the_path_and_the_root_cgroup_has_no_directory() {
        let text = "4:memory:/x\n0::/system.slice/job.service\n";
        let m = find_mount(HYBRID).unwrap();
        let path = unified_path(text).expect("a 0:: line");
        assert_eq!(
            dir_of(&m, path),
            Some(PathBuf::from(
                "/sys/fs/cgroup/unified/system.slice/job.service"
            ))
        );
        assert_eq!(dir_of(&m, "/"), None);
        assert_eq!(dir_of(&m, "/../other"), None);
        assert_eq!(unified_path("1:cpu:/\n"), None);
    }

    #[test]
    fn a_mounted_subtree_strips_its_root() {
        let m = Mount {
            point: PathBuf::from("/cg"),
            root: "/user.slice".into(),
        };
        assert_eq!(
            dir_of(&m, "/user.slice/a.scope"),
            Some(PathBuf::from("/cg/a.scope"))
        );
        assert_eq!(dir_of(&m, "/user.slice"), None);
        assert_eq!(dir_of(&m, "/user.slicex/a"), None);
        assert_eq!(dir_of(&m, "/system.slice/b"), None);
    }

    #[test]
    fn populated_is_read_from_the_events_file() {
        assert_eq!(populated("populated 1\nfrozen 0\n"), Some(true));
        assert_eq!(populated("populated 0\nfrozen 0\n"), Some(false));
        assert_eq!(populated("frozen 0\n"), None);
    }
}
