//! N `snaplockd` processes on a loopback address of their cluster's own
//! ([`loopback_addrs`]), each with its own socket, listen port and log,
//! stopped by pid when the guard drops.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use snaplock_proto::wire::Message;

use crate::common::{Client, TempDir, cli_binary, loopback_addrs, now, snaplockd};

pub struct Cluster {
    pub dir: TempDir,
    addrs: Vec<SocketAddr>,
    children: Vec<Option<Child>>,
}

impl Cluster {
    /// Starts `n` agents and waits until every one of them is ready.
    pub fn start(tag: &str, n: usize) -> Cluster {
        let c = Cluster::start_some(tag, n, n);
        for i in 0..n {
            c.wait_ready(i, Duration::from_secs(30));
        }
        c
    }

    /// Starts only the first `up` of `n` agents (the others are members
    /// that are down); waits for nothing.
    pub fn start_some(tag: &str, n: usize, up: usize) -> Cluster {
        // snaplock-cli is built (once per test process) before any agent
        // starts: a build inside a timed step would outlast what it times.
        cli_binary();
        let mut c = Cluster {
            dir: TempDir::new(tag),
            addrs: loopback_addrs(n),
            children: (0..n).map(|_| None).collect(),
        };
        for i in 0..up {
            c.spawn(i);
        }
        c
    }

    /// Agent `i`'s listen address (the conductor is the agent with the
    /// lowest; they differ by their ports only).
    pub fn addr(&self, i: usize) -> SocketAddr {
        self.addrs[i]
    }

    pub fn socket(&self, i: usize) -> PathBuf {
        self.dir.path().join(format!("n{i}.sock"))
    }

    fn spawn(&mut self, i: usize) {
        let neighbors: Vec<String> = self.addrs.iter().map(ToString::to_string).collect();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join(format!("n{i}.log")))
            .unwrap();
        let child = snaplockd()
            .arg("--socket")
            .arg(self.socket(i))
            .arg("--state-dir")
            .arg(self.dir.path())
            .args(["-n", &format!("node{i}")])
            .args(["--listen", &self.addrs[i].to_string()])
            .args(["--neighbors", &neighbors.join(",")])
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("snaplockd starts");
        self.children[i] = Some(child);
    }

    pub fn restart(&mut self, i: usize) {
        assert!(self.children[i].is_none(), "node{i} still runs");
        self.spawn(i);
    }

    pub fn signal(&self, i: usize, sig: Signal) {
        let child = self.children[i].as_ref().expect("running");
        kill(Pid::from_raw(child.id() as i32), sig).unwrap();
    }

    /// Reaps a killed agent (bounded).
    pub fn wait_exit(&mut self, i: usize) {
        let mut child = self.children[i].take().expect("running");
        let start = now();
        while child.try_wait().unwrap().is_none() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "node{i} did not exit"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn info(&self, i: usize) -> Message {
        let mut c = Client::connect(&self.socket(i));
        c.send("INFO");
        c.recv()
    }

    pub fn wait_for(&self, i: usize, limit: Duration, ok: impl Fn(&Message) -> bool) -> Message {
        let start = now();
        loop {
            if let Ok(mut c) = std::panic::catch_unwind(|| Client::connect(&self.socket(i))) {
                c.send("INFO");
                let info = c.recv();
                if ok(&info) {
                    return info;
                }
                if start.elapsed() > limit {
                    panic!("node{i} not there in {limit:?}: {info}\n{}", self.logs());
                }
            } else if start.elapsed() > limit {
                panic!("node{i} has no socket after {limit:?}\n{}", self.logs());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn wait_ready(&self, i: usize, limit: Duration) -> Message {
        self.wait_for(i, limit, |m| m.get_str("ready") == Some("true"))
    }

    pub fn wait_connected(&self, i: usize, n: usize, limit: Duration) -> Message {
        let want = n.to_string();
        self.wait_for(i, limit, |m| {
            m.get_str("ready") == Some("true") && m.get_str("connected") == Some(want.as_str())
        })
    }

    /// Waits until the `n` agents are ready, connected to each other, in
    /// the same epoch with the same min(3, n) leaders.
    pub fn wait_converged(&self, n: usize, limit: Duration) {
        let start = now();
        loop {
            let infos: Vec<Message> = (0..n).map(|i| self.wait_connected(i, n, limit)).collect();
            let same = infos.iter().all(|m| {
                m.get_str("epoch") == infos[0].get_str("epoch")
                    && m.get_str("leaders") == infos[0].get_str("leaders")
            });
            let leaders = infos[0].get_str("leaders").unwrap_or("").split(',').count();
            if same && leaders == n.min(3) {
                return;
            }
            assert!(
                start.elapsed() < limit,
                "no convergence in {limit:?}: {infos:?}\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `snaplock-cli --socket <node i> args...`: its standard output.
    pub fn cli(&self, i: usize, args: &[&str]) -> String {
        let out = std::process::Command::new(cli_binary())
            .arg("--socket")
            .arg(self.socket(i))
            .args(args)
            .output()
            .expect("snaplock-cli runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `snaplock-cli --socket <node i> args...`: its exit status and
    /// standard error.
    pub fn cli_status(&self, i: usize, args: &[&str]) -> (Option<i32>, String) {
        let out = std::process::Command::new(cli_binary())
            .arg("--socket")
            .arg(self.socket(i))
            .args(args)
            .output()
            .expect("snaplock-cli runs");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Agent `i`'s whole log.
    pub fn log(&self, i: usize) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("n{i}.log"))).unwrap_or_default()
    }

    /// Every agent's log, for a failure message.
    pub fn logs(&self) -> String {
        let mut all = String::new();
        for i in 0..self.children.len() {
            let path = self.dir.path().join(format!("n{i}.log"));
            let text = std::fs::read_to_string(path).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(40).collect();
            all.push_str(&format!("--- node{i} (last lines) ---\n"));
            for l in tail.into_iter().rev() {
                all.push_str(l);
                all.push('\n');
            }
        }
        all
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for child in self.children.iter_mut().flatten() {
            let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGCONT);
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
