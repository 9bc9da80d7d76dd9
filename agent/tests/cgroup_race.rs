//! The race of a cgroup that is empty when its lock is granted, with a real
//! cgroup where the computer has one. Alone in its test binary: it moves
//! this process between cgroups, which no other test may see.

mod common;

#[path = "../../tests/support/cgroup.rs"]
mod cgroup;

use std::time::Duration;

use cgroup::Setup;
use common::{Client, Daemon, TempDir, WAIT, param};

/// The cgroup is empty when the watch is set up: the client connected from
/// it, then moved out before its LOCK. Its lock is granted and lost at once.
/// A process of its own runs the agent, so that moving this one moves no
/// agent. Where no cgroup can be made, `cgroup.rs` checks the refusal.
#[test]
fn a_cgroup_already_empty_when_its_lock_is_granted_ends_the_lock_at_once() {
    let Setup::Own(cg) = Setup::probe("empty") else {
        eprintln!("no cgroup of our own: the race needs one (see the test above)");
        return;
    };
    let dir = TempDir::new("cgroup-empty");
    let socket = dir.socket();
    let _daemon = Daemon::start(&socket, &[], &[]);
    let origin = cgroup::own_path().expect("our cgroup");
    let point = cgroup::mount().expect("the mount");
    let back = point
        .join(origin.trim_start_matches('/'))
        .join("cgroup.procs");
    let here = cg.dir.join("cgroup.procs");
    let pid = std::process::id().to_string();
    std::fs::write(&here, &pid).expect("enter the test cgroup");
    // The agent reads a client's cgroup when it accepts it, before it
    // answers its first line.
    let connected = std::os::unix::net::UnixStream::connect(&socket).map(|s| {
        let mut c = Client::from_stream(s);
        let alive = c.request("ALIVE");
        (c, alive)
    });
    // Back where it was before anything can fail.
    std::fs::write(&back, &pid).expect("leave the test cgroup");
    let (mut client, alive) = connected.expect("connect");
    assert_eq!(alive.command, "ABSOLUTELY", "{alive:?}");
    cg.wait_for_procs(0, WAIT);
    client.send("LOCK object_name=moved-job;owner=cgroup");
    let first = client.recv_within(WAIT);
    assert_eq!(first.command, "LOCKED", "{first:?}");
    let second = client.recv_within(Duration::from_secs(2));
    assert_eq!(
        (second.command.as_str(), param(&second, "error")),
        ("UNLOCKED", "lost"),
        "{second:?}"
    );
    let mut other = Client::connect(&socket);
    let free = other.request("LOCK object_name=moved-job;try=true");
    assert_eq!(free.command, "LOCKED", "released with its cgroup: {free:?}");
}
