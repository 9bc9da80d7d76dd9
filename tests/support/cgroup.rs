//! Shared by the test harnesses of several packages (included with
//! `#[path]`): a cgroup v2 of the test's own, for locks owned by a unit
//! (`owner=cgroup`), and what to expect where there is none.

#![allow(dead_code)] // each harness uses its own part

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Now, for bounding the waits on real processes.
#[allow(clippy::disallowed_methods)] // tests time the real processes they run
fn started() -> Instant {
    Instant::now()
}

/// What this computer offers the tests of `owner=cgroup`.
pub enum Setup {
    /// A fresh cgroup, removed on drop: the full test.
    Own(TestCgroup),
    /// No cgroup can be made, but the test runs in a cgroup other than the
    /// root (a user session's scope, say): the agent accepts `owner=cgroup`
    /// from it, and that cgroup outlives the test.
    Inherited(String),
    /// No cgroup v2, or the test runs in the root cgroup and cannot make
    /// one: the agent must refuse `owner=cgroup` with `error=invalid`.
    Refused(String),
}

impl Setup {
    /// Tries to make a cgroup named after `what`; says which branch it is.
    pub fn probe(what: &str) -> Setup {
        let setup = match mount() {
            None => Setup::Refused("no cgroup2 mount in /proc/self/mountinfo".into()),
            Some(point) => match TestCgroup::create(&point, what) {
                Ok(cg) => Setup::Own(cg),
                Err(why) => match own_path() {
                    Some(p) if p != "/" => Setup::Inherited(format!(
                        "cannot make a cgroup ({why}); this process is in {p}"
                    )),
                    _ => Setup::Refused(format!(
                        "cannot make a cgroup ({why}) and this process is in the root cgroup"
                    )),
                },
            },
        };
        match &setup {
            Setup::Own(cg) => eprintln!("cgroup branch: own cgroup {}", cg.dir.display()),
            Setup::Inherited(why) => eprintln!("cgroup branch: inherited cgroup: {why}"),
            Setup::Refused(why) => eprintln!("cgroup branch: refused (error=invalid): {why}"),
        }
        setup
    }
}

/// The cgroup2 mount point.
pub fn mount() -> Option<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    text.lines().find_map(|l| {
        let (fields, rest) = l.split_once(" - ")?;
        if rest.split(' ').next()? != "cgroup2" {
            return None;
        }
        fields.split(' ').nth(4).map(PathBuf::from)
    })
}

/// This process's cgroup v2 path.
pub fn own_path() -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(str::to_owned)
}

/// A cgroup made for one test: its processes are killed and it is removed
/// on drop.
pub struct TestCgroup {
    pub dir: PathBuf,
}

impl TestCgroup {
    fn create(point: &Path, what: &str) -> Result<TestCgroup, String> {
        let dir = point.join(format!("snaplock-test-{what}-{}", std::process::id()));
        std::fs::create_dir(&dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
        let cg = TestCgroup { dir };
        // Moving a process in needs write access to cgroup.procs here and
        // where it comes from; a short-lived `true` tells.
        let mut probe = std::process::Command::new("sh");
        probe.args(["-c", &format!("{} true", cg.enter())]);
        match probe.status() {
            Ok(s) if s.success() => Ok(cg),
            Ok(s) => Err(format!("cannot move a process into it ({s})")),
            Err(e) => Err(format!("cannot run sh: {e}")),
        }
    }

    /// Shell text that moves the shell into this cgroup and then `exec`s
    /// what follows it.
    pub fn enter(&self) -> String {
        format!(
            "echo $$ > '{}' && exec",
            self.dir.join("cgroup.procs").display()
        )
    }

    /// The pids in it.
    pub fn procs(&self) -> Vec<i32> {
        std::fs::read_to_string(self.dir.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    /// Waits at most `bound` until it has `n` processes.
    pub fn wait_for_procs(&self, n: usize, bound: Duration) {
        let start = started();
        while self.procs().len() != n {
            assert!(
                start.elapsed() < bound,
                "{} has {:?}, not {n} processes, after {bound:?}",
                self.dir.display(),
                self.procs()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// SIGKILL to every process in it, by pid, until none is left (at most
    /// 5 s).
    pub fn kill_all(&self) {
        let start = started();
        loop {
            let procs = self.procs();
            if procs.is_empty() || start.elapsed() > Duration::from_secs(5) {
                return;
            }
            for pid in procs {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        self.kill_all();
        if let Err(e) = std::fs::remove_dir(&self.dir) {
            eprintln!("cannot remove {}: {e}", self.dir.display());
        }
    }
}
