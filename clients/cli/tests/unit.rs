//! `snaplock-cli lock --unit` against a real agent, in a real cgroup where
//! the computer has one: the lock outlives snaplock-cli and its guard while
//! the command runs in the unit, and ends when the unit is empty. Where no
//! cgroup v2 is usable, the documented refusal. Each test prints which
//! branch it took.

mod common;

#[path = "../../../tests/support/cgroup.rs"]
mod cgroup;

use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::Duration;

use cgroup::Setup;
use common::{Agent, CLI, Running, TempDir, now, run, wait_for_file};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

const BOUND: Duration = Duration::from_secs(20);
/// How soon after the unit's last process ends the lock must be free.
const PROMPT: Duration = Duration::from_secs(3);
/// The command: up to 15 s in short steps.
const SLEEP_LOOP: &str = "i=0; while [ $i -lt 300 ]; do sleep 0.05; i=$((i+1)); done";

/// `lock -n NAME -- true`: 0 when it was free, 1 when taken.
fn try_lock(agent: &Agent, name: &str) -> i32 {
    let mut cmd = agent.cli();
    cmd.args(["lock", "-n", name, "--", "true"]);
    run(cmd, BOUND).code()
}

#[test]
fn lock_unit_keeps_the_lock_while_the_command_outlives_snaplock_cli_and_ends_it_with_the_unit() {
    let agent = Agent::start();
    let dir = TempDir::new("unit");
    match Setup::probe("cli") {
        Setup::Own(cg) => {
            let held = dir.path("held");
            let command = dir.path("command.sh");
            let text = format!("touch '{}'; {SLEEP_LOOP}\n", held.display());
            std::fs::write(&command, text).expect("the command's script");
            let script = format!(
                "{} '{CLI}' --socket '{}' lock --unit -w 5 unit-job -- sh '{}'",
                cg.enter(),
                agent.socket.display(),
                command.display()
            );
            let mut cmd = Command::new("sh");
            // snaplock-cli and its guard in a group of their own, which
            // SIGKILL reaches at once; the command has its own group.
            cmd.args(["-c", &script]).process_group(0);
            let running = Running::spawn(cmd);
            wait_for_file(&held, BOUND);
            let group = running.pid();
            killpg(Pid::from_raw(group.as_raw()), Signal::SIGKILL).expect("kill snaplock-cli");
            let done = running.wait(BOUND);
            assert_eq!(done.status.code(), None, "killed: {done:?}");
            assert!(!cg.procs().is_empty(), "the command still runs in the unit");
            for _ in 0..5 {
                assert_eq!(try_lock(&agent, "unit-job"), 1, "held while the unit runs");
                std::thread::sleep(Duration::from_millis(50));
            }
            cg.kill_all();
            let start = now();
            while try_lock(&agent, "unit-job") != 0 {
                assert!(
                    start.elapsed() < PROMPT,
                    "still held once the unit is empty"
                );
                std::thread::sleep(Duration::from_millis(10));
            }
            eprintln!("unit emptied to the lock's release: {:?}", start.elapsed());
        }
        Setup::Inherited(_) => {
            let mut cmd = agent.cli();
            cmd.args(["lock", "--unit", "unit-job", "--", "true"]);
            assert_eq!(run(cmd, BOUND).code(), 0);
            assert_eq!(try_lock(&agent, "unit-job"), 0, "released when it ended");
        }
        Setup::Refused(_) => {
            let ran = dir.path("ran");
            let mut cmd = agent.cli();
            cmd.args(["lock", "--unit", "unit-job", "--", "touch"])
                .arg(&ran);
            let done = run(cmd, BOUND);
            assert_eq!(done.code(), 70, "{done:?}");
            assert!(done.stderr.contains("cgroup v2"), "{done:?}");
            assert!(!ran.exists(), "the command never ran");
        }
    }
}

#[test]
fn lock_unit_runs_the_command_and_releases_the_lock_when_it_ends() {
    let agent = Agent::start();
    let Setup::Own(cg) = Setup::probe("cli-ends") else {
        eprintln!("no cgroup of our own: the test above covers this computer");
        return;
    };
    let script = format!(
        "{} '{CLI}' --socket '{}' lock --unit unit-ends -- sh -c 'echo \"$SNAPLOCK_OBJECT\"; exit 3'",
        cg.enter(),
        agent.socket.display(),
    );
    let mut cmd = Command::new("sh");
    cmd.args(["-c", &script]);
    let done = run(cmd, BOUND);
    assert_eq!(done.code(), 3, "its status is passed through: {done:?}");
    assert_eq!(done.stdout.trim_end(), "unit-ends");
    assert_eq!(try_lock(&agent, "unit-ends"), 0, "released at its end");
}
