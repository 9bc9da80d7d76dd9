//! Locks owned by a unit (`owner=cgroup`) with real processes in a real
//! cgroup where the computer has one; elsewhere, the documented refusal.
//! Each test prints which branch it took.

mod common;

#[path = "../../tests/support/cgroup.rs"]
mod cgroup;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use cgroup::{Setup, TestCgroup};
use common::{Client, WAIT, cli_binary, now, param, start};

/// How soon after its last process ends a cgroup's lock must be free:
/// inotify reports at once; this only bounds the test.
const PROMPT: Duration = Duration::from_secs(2);

/// `sh -c '<enter the cgroup> exec <args>'`.
fn in_cgroup(cg: &TestCgroup, args: &str) -> Command {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", &format!("{} {args}", cg.enter())])
        .stdin(Stdio::null());
    cmd
}

/// Reaps `child` after killing it, whatever happened.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Polls with `LOCK try=true` until `name` is granted to `client`, at most
/// `bound`; returns how long it took.
fn until_granted(client: &mut Client, name: &str, bound: Duration) -> Duration {
    let start = now();
    loop {
        let reply = client.request(&format!("LOCK object_name={name};try=true"));
        if reply.command == "LOCKED" {
            client.request(&format!("UNLOCK object_name={name}"));
            return start.elapsed();
        }
        assert_eq!(param(&reply, "error"), "busy", "{reply:?}");
        assert!(
            start.elapsed() < bound,
            "{name} is still held {bound:?} after its cgroup emptied"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_lock_owned_by_a_cgroup_stays_after_its_connection_while_a_process_remains_and_goes_when_none_is_left()
 {
    let (dir, _agent) = start("cgroup", |_| {});
    let socket = dir.socket();
    let mut other = Client::connect(&socket);
    match Setup::probe("agent") {
        Setup::Own(cg) => {
            // A process that keeps the cgroup populated, and one that takes
            // the lock in it and leaves (its connection closes).
            let sleeper = Reaped(in_cgroup(&cg, "sleep 60").spawn().expect("sleep starts"));
            cg.wait_for_procs(1, WAIT);
            let out = in_cgroup(
                &cg,
                &format!(
                    "'{}' --socket '{}' send -t 5 'LOCK object_name=unit-job;pid=4242;owner=cgroup'",
                    cli_binary().display(),
                    socket.display()
                ),
            )
            .output()
            .expect("snaplock-cli runs");
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(text.starts_with("LOCKED "), "{out:?}");
            cg.wait_for_procs(1, WAIT);
            let busy = other.request("LOCK object_name=unit-job;try=true");
            assert_eq!(
                param(&busy, "error"),
                "busy",
                "held after its connection closed"
            );
            let list = other.request("LISTTICKETS");
            assert!(param(&list, "list").contains("owner: cgroup"), "{list:?}");
            std::thread::sleep(Duration::from_millis(200));
            let busy = other.request("LOCK object_name=unit-job;try=true");
            assert_eq!(param(&busy, "error"), "busy", "still held while sleep runs");
            drop(sleeper);
            let took = until_granted(&mut other, "unit-job", PROMPT);
            eprintln!("last process killed to the lock's release: {took:?}");
        }
        Setup::Inherited(_) => {
            // This process's own cgroup owns it; it outlives the test.
            let mut taker = Client::connect(&socket);
            let got = taker.request("LOCK object_name=unit-job;pid=4242;owner=cgroup");
            assert_eq!(got.command, "LOCKED", "{got:?}");
            drop(taker);
            let busy = other.request("LOCK object_name=unit-job;try=true");
            assert_eq!(
                param(&busy, "error"),
                "busy",
                "held after its connection closed"
            );
            let done = other.request("UNLOCK object_name=unit-job;pid=4242");
            assert_eq!(done.command, "UNLOCKED", "{done:?}");
        }
        Setup::Refused(_) => {
            let got = other.request("LOCK object_name=unit-job;owner=cgroup");
            assert_eq!(got.command, "LOCKFAILED", "{got:?}");
            assert_eq!(param(&got, "error"), "invalid", "{got:?}");
            assert!(param(&got, "description").contains("cgroup v2"), "{got:?}");
        }
    }
}

#[test]
fn a_client_in_the_root_cgroup_or_without_cgroup_v2_is_refused_owner_cgroup_as_invalid() {
    let (dir, _agent) = start("cgroup-root", |_| {});
    if cgroup::mount().is_some() && cgroup::own_path().as_deref() != Some("/") {
        eprintln!("cgroup branch: this process is not in the root cgroup: nothing to check");
        return;
    }
    eprintln!("cgroup branch: the root cgroup, or no cgroup v2: refused");
    let mut c = Client::connect(&dir.socket());
    let got = c.request("LOCK object_name=root-job;owner=cgroup");
    assert_eq!(
        (got.command.as_str(), param(&got, "error")),
        ("LOCKFAILED", "invalid"),
        "{got:?}"
    );
    let got = c.request("LOCK object_name=root-job");
    assert_eq!(
        got.command, "LOCKED",
        "an ordinary lock is still granted: {got:?}"
    );
}
