//! `snaplock-cli status | list | who | info | send`, usage errors and a missing
//! agent, against a real agent.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{Agent, CLI, Running, TempDir, run, sh, wait_for_file};

const BOUND: Duration = Duration::from_secs(20);

#[test]
fn status_says_ready_and_exits_0() {
    let agent = Agent::start();
    let mut cmd = agent.cli();
    cmd.arg("status");
    let done = run(cmd, BOUND);
    assert_eq!(
        (done.code(), done.stdout.as_str()),
        (0, "ready\n"),
        "{done:?}"
    );
}

#[test]
fn the_socket_can_come_from_the_environment() {
    let agent = Agent::start();
    let mut cmd = Command::new(CLI);
    cmd.arg("status").env("SNAPLOCK_SOCKET", &agent.socket);
    let done = run(cmd, BOUND);
    assert_eq!(done.code(), 0, "{done:?}");
}

#[test]
fn info_prints_name_value_lines() {
    let agent = Agent::start();
    let mut cmd = agent.cli();
    cmd.arg("info");
    let done = run(cmd, BOUND);
    assert_eq!(done.code(), 0, "{done:?}");
    let lines: Vec<&str> = done.stdout.lines().collect();
    assert!(lines.contains(&"ready: true"), "{done:?}");
    assert!(
        lines.contains(&format!("version: {}", snaplock_proto::VERSION).as_str()),
        "{done:?}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("server_name: ")),
        "{done:?}"
    );
    assert!(lines.iter().all(|l| l.contains(": ")), "{done:?}");
}

#[test]
fn list_shows_a_held_lock_and_nothing_once_it_is_released() {
    let agent = Agent::start();
    let dir = TempDir::new("list");
    let (held, release) = (dir.path("held"), dir.path("release"));
    let script = format!(
        "touch '{}'; i=0; while [ ! -e '{}' ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done",
        held.display(),
        release.display()
    );
    let mut cmd = agent.cli();
    cmd.args(["lock", "listed/object", "--"]).args(sh(&script));
    let holder = Running::spawn(cmd);
    wait_for_file(&held, Duration::from_secs(10));

    let mut cmd = agent.cli();
    cmd.arg("list");
    let done = run(cmd, BOUND);
    assert_eq!(done.code(), 0, "{done:?}");
    assert_eq!(done.stdout.lines().count(), 1, "{done:?}");
    assert!(done.stdout.contains("listed/object"), "{done:?}");

    std::fs::write(&release, b"").expect("release");
    assert_eq!(holder.wait(BOUND).code(), 0);
    let mut cmd = agent.cli();
    cmd.arg("list");
    let done = run(cmd, BOUND);
    assert_eq!((done.code(), done.stdout.as_str()), (0, ""), "{done:?}");
}

#[test]
fn who_prints_the_holder_and_the_queue_of_a_name_on_an_agent_alone() {
    let agent = Agent::start();
    let dir = TempDir::new("who");
    let (held, release) = (dir.path("held"), dir.path("release"));
    let script = format!(
        "touch '{}'; i=0; while [ ! -e '{}' ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done",
        held.display(),
        release.display()
    );
    let mut cmd = agent.cli();
    cmd.args(["lock", "who/object", "--"]).args(sh(&script));
    let holder = Running::spawn(cmd);
    wait_for_file(&held, Duration::from_secs(10));
    let mut cmd = agent.cli();
    cmd.args(["lock", "-s", "-w", "10", "who/object", "true"]);
    let waiter = Running::spawn(cmd);

    let mut lines = Vec::new();
    for _ in 0..100 {
        let mut cmd = agent.cli();
        cmd.args(["who", "who/object"]);
        let done = run(cmd, BOUND);
        assert_eq!(done.code(), 0, "{done:?}");
        lines = done.stdout.lines().map(str::to_owned).collect();
        if lines.iter().any(|l| l.starts_with("waiting 1: ")) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(lines[0], "name: who/object");
    assert!(lines[1].starts_with("holder: "), "{lines:?}");
    assert!(
        lines[1].contains("  mode: exclusive  since: 20"),
        "{lines:?}"
    );
    assert!(lines[1].contains("  fence: "), "{lines:?}");
    assert!(lines[2].starts_with("waiting 1: "), "{lines:?}");
    assert!(lines[2].ends_with("  mode: shared"), "{lines:?}");

    std::fs::write(&release, b"").expect("release");
    assert_eq!(holder.wait(BOUND).code(), 0);
    assert_eq!(waiter.wait(BOUND).code(), 0);
    let mut cmd = agent.cli();
    cmd.args(["who", "who/object"]);
    let done = run(cmd, BOUND);
    assert_eq!(
        (done.code(), done.stdout.as_str()),
        (0, "name: who/object\nholder: none\nqueue: empty\n"),
        "{done:?}"
    );
}

#[test]
fn send_prints_the_replies_to_a_raw_line() {
    let agent = Agent::start();
    for (line, expected) in [
        ("LOCKSTATUS", "LOCKREADY\n"),
        ("HELLO", "UNKNOWN command=HELLO\n"),
        ("ALIVE serial=7", "ABSOLUTELY "),
        ("not a message", "INVALID "),
        ("LOCK object_name=raw;tag=5", "LOCKED "),
    ] {
        let mut cmd = agent.cli();
        cmd.args(["send", "-t", "5", line]);
        let done = run(cmd, BOUND);
        assert_eq!(done.code(), 0, "{line}: {done:?}");
        assert!(done.stdout.starts_with(expected), "{line}: {done:?}");
        assert_eq!(done.stdout.lines().count(), 1, "{line}: {done:?}");
        assert!(
            done.took < Duration::from_secs(2),
            "quiet after 0.25 s: {done:?}"
        );
    }
    let mut cmd = agent.cli();
    cmd.args(["send", "LOCK object_name=raw;tag=5;timeout=1"]);
    let done = run(cmd, BOUND);
    assert!(done.stdout.contains("tag=5"), "{done:?}");
    assert!(
        done.stdout.contains("LOCKFAILED") && done.stdout.contains("error=timedout"),
        "{done:?}"
    );
}

#[test]
fn a_missing_agent_is_unavailable() {
    let dir = TempDir::new("noagent");
    for args in [
        &["status"][..],
        &["list"],
        &["who", "x"],
        &["info"],
        &["send", "INFO"],
        &["lock", "x", "true"],
    ] {
        let mut cmd = Command::new(CLI);
        cmd.arg("--socket").arg(dir.path("none.sock")).args(args);
        let done = run(cmd, BOUND);
        assert_eq!(done.code(), 69, "{args:?}: {done:?}");
        assert!(
            done.stderr
                .starts_with("snaplock-cli: error: cannot connect"),
            "{done:?}"
        );
    }
}

#[test]
fn usage_errors_exit_64_and_help_and_version_exit_0() {
    for args in [
        &[][..],
        &["lock", "x"],
        &["lock", "-E", "256", "x", "true"],
        &["bogus"],
        &["status", "x"],
    ] {
        let mut cmd = Command::new(CLI);
        cmd.args(args);
        let done = run(cmd, BOUND);
        assert_eq!(done.code(), 64, "{args:?}: {done:?}");
        assert!(done.stderr.starts_with("snaplock-cli: error: "), "{done:?}");
    }
    let mut cmd = Command::new(CLI);
    cmd.arg("--help");
    let done = run(cmd, BOUND);
    assert_eq!(done.code(), 0);
    assert!(
        done.stdout.contains("Exit status:") && done.stdout.contains("lock [-w SECS]"),
        "{done:?}"
    );
    let mut cmd = Command::new(CLI);
    cmd.arg("-V");
    let done = run(cmd, BOUND);
    assert_eq!(
        done.stdout,
        format!("snaplock-cli {}\n", snaplock_proto::VERSION)
    );
}
