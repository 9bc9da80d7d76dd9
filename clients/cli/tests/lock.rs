//! `snaplock-cli lock` against a real agent: lock-and-run, conflicts,
//! mutual exclusion, renewal, and stopping the command when the lock is lost.

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use common::{Agent, Running, TempDir, Tree, now, run, sh, wait_for_file};
use nix::sys::signal::{Signal, kill};

const BOUND: Duration = Duration::from_secs(20);

/// Sleeps up to 15 s in short foreground steps, so a trapped signal runs its
/// trap within 50 ms. (With `sleep 30 & wait`, a `kill $!` in the trap can
/// reach the forked child before it drops the shell's handler, and the
/// sleep would outlive the test holding its output pipes.)
const SLEEP_LOOP: &str = "i=0; while [ $i -lt 300 ]; do sleep 0.05; i=$((i+1)); done";

/// A `lock` run that holds `name` until `release` exists; returns once it
/// holds the lock.
fn hold(agent: &Agent, dir: &TempDir, name: &str) -> Running {
    hold_with(agent, dir, name, &[])
}

/// [`hold`] with more `lock` options.
fn hold_with(agent: &Agent, dir: &TempDir, name: &str, options: &[&str]) -> Running {
    let held = dir.path("held");
    let release = dir.path("release");
    let script = format!(
        "touch '{}'; i=0; while [ ! -e '{}' ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done",
        held.display(),
        release.display()
    );
    let mut cmd = agent.cli();
    cmd.args(["lock", "-w", "5"])
        .args(options)
        .args([name, "--"])
        .args(sh(&script));
    let running = Running::spawn(cmd);
    wait_for_file(&held, Duration::from_secs(10));
    running
}

fn release(dir: &TempDir, holder: Running) {
    fs::write(dir.path("release"), b"").expect("release file");
    let done = holder.wait(BOUND);
    assert_eq!(done.code(), 0, "{done:?}");
}

#[test]
fn the_command_gets_the_three_variables_and_its_status_is_passed_through() {
    let agent = Agent::start();
    let mut cmd = agent.cli();
    cmd.args(["lock", "job/1;x", "--"]).args(sh(
        "echo \"$SNAPLOCK_OBJECT|$SNAPLOCK_FENCE|$SNAPLOCK_TIMEOUT_DATE\"; exit 7",
    ));
    let done = run(cmd, BOUND);
    assert_eq!(done.code(), 7, "{done:?}");
    let line = done.stdout.trim_end();
    let parts: Vec<&str> = line.split('|').collect();
    assert_eq!(parts.len(), 3, "{line}");
    assert_eq!(parts[0], "job/1;x");
    assert!(
        parts[1].parse::<u64>().expect("a numeric fence") >= 1,
        "{line}"
    );
    let date: f64 = parts[2].parse().expect("a date in Unix seconds");
    let now_secs = std::time::UNIX_EPOCH
        .elapsed()
        .expect("clock")
        .as_secs_f64();
    assert!(
        date > now_secs + 30.0 && date < now_secs + 61.0,
        "the default lease is 60 s: {line}"
    );
    assert!(done.stderr.is_empty(), "{done:?}");
}

#[test]
fn the_exit_status_reports_a_signal_and_commands_that_cannot_run() {
    let agent = Agent::start();
    let dir = TempDir::new("exec");
    let mut cmd = agent.cli();
    cmd.args(["lock", "x", "--"]).args(sh("kill -USR1 $$"));
    assert_eq!(run(cmd, BOUND).code(), 128 + 10, "killed by SIGUSR1");

    let mut cmd = agent.cli();
    cmd.args(["lock", "x", "/nonexistent/command"]);
    let done = run(cmd, BOUND);
    assert_eq!(done.code(), 127, "{done:?}");
    assert!(
        done.stderr
            .contains("snaplock-cli: error: cannot run /nonexistent/command"),
        "{done:?}"
    );

    let script = dir.path("not-executable");
    fs::write(&script, "#!/bin/sh\n").expect("write");
    fs::set_permissions(&script, fs::Permissions::from_mode(0o644)).expect("chmod");
    let mut cmd = agent.cli();
    cmd.args(["lock", "x"]).arg(&script);
    assert_eq!(run(cmd, BOUND).code(), 126);

    // The lock was released each time: it is free now.
    let mut cmd = agent.cli();
    cmd.args(["lock", "-n", "x", "true"]);
    assert_eq!(run(cmd, BOUND).code(), 0);
}

#[test]
fn a_taken_lock_with_nonblock_exits_at_once_with_the_conflict_code() {
    let agent = Agent::start();
    let dir = TempDir::new("nonblock");
    let holder = hold(&agent, &dir, "busy");
    let mut cmd = agent.cli();
    cmd.args(["lock", "-n", "-E", "42", "busy", "--", "touch"])
        .arg(dir.path("ran"));
    let done = run(cmd, BOUND);
    assert_eq!(done.code(), 42, "{done:?}");
    assert!(done.took < Duration::from_secs(2), "{done:?}");
    assert!(
        done.stderr.is_empty(),
        "conflicts are silent, as with flock: {done:?}"
    );
    assert!(
        !dir.path("ran").exists(),
        "the command must not run without the lock"
    );
    // A shared request conflicts with the exclusive holder as well; -w 0 is -n.
    let mut cmd = agent.cli();
    cmd.args(["lock", "-s", "-w", "0", "busy", "true"]);
    assert_eq!(run(cmd, BOUND).code(), 1);
    release(&dir, holder);
}

#[test]
fn waiting_too_long_exits_with_the_conflict_code_after_the_wait() {
    let agent = Agent::start();
    let dir = TempDir::new("wait");
    let holder = hold(&agent, &dir, "slow");
    let mut cmd = agent.cli();
    cmd.args(["lock", "-w", "1", "slow", "true"]);
    let done = run(cmd, BOUND);
    assert_eq!(done.code(), 1, "{done:?}");
    assert!(
        done.took >= Duration::from_millis(900) && done.took < Duration::from_millis(2500),
        "{done:?}"
    );
    assert!(
        done.stderr
            .contains("not obtained: still taken after waiting 1 s"),
        "{done:?}"
    );
    release(&dir, holder);
}

#[test]
fn without_wait_option_the_cli_waits_as_flock_does() {
    let agent = Agent::start();
    let dir = TempDir::new("waitlong");
    let holder = hold(&agent, &dir, "long");
    let mut cmd = agent.cli();
    cmd.args(["lock", "long", "-c", "echo got it"]);
    let waiter = Running::spawn(cmd);
    // Longer than the 5 s after which it used to give up.
    std::thread::sleep(Duration::from_millis(6500));
    release(&dir, holder);
    let done = waiter.wait(BOUND);
    assert_eq!(done.code(), 0, "{done:?}");
    assert_eq!(done.stdout, "got it\n");
}

#[test]
fn flock_habits_work_the_same() {
    let agent = Agent::start();
    let dir = TempDir::new("habits");
    // -x (or -e) and -c: an exclusive lock, the command through sh -c.
    for flag in ["-x", "-e"] {
        let mut cmd = agent.cli();
        cmd.args([
            "lock",
            flag,
            "habit",
            "-c",
            "echo \"$SNAPLOCK_OBJECT\" | tr a-z A-Z",
        ]);
        let done = run(cmd, BOUND);
        assert_eq!(done.code(), 0, "{done:?}");
        assert_eq!(done.stdout, "HABIT\n", "{flag}");
    }
    // -n -E 0: skip quietly when taken, without running the command.
    let holder = hold(&agent, &dir, "habit");
    let ran = dir.path("ran");
    let mut cmd = agent.cli();
    cmd.args(["lock", "-n", "-E", "0", "habit", "-c"])
        .arg(format!("touch '{}'", ran.display()));
    let done = run(cmd, BOUND);
    assert_eq!(done.code(), 0, "{done:?}");
    assert!(done.stderr.is_empty() && done.stdout.is_empty(), "{done:?}");
    assert!(!ran.exists());
    release(&dir, holder);
}

#[test]
fn shared_locks_run_together() {
    let agent = Agent::start();
    let dir = TempDir::new("shared");
    let script = |me: &str| {
        let (mine, other) = (dir.path(me), dir.path(if me == "a" { "b" } else { "a" }));
        format!(
            "touch '{}'; i=0; while [ ! -e '{}' ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done; [ -e '{}' ]",
            mine.display(),
            other.display(),
            other.display()
        )
    };
    let mut a = agent.cli();
    a.args(["lock", "-s", "rw", "--"]).args(sh(&script("a")));
    let mut b = agent.cli();
    b.args(["lock", "-s", "rw", "--"]).args(sh(&script("b")));
    let (a, b) = (Running::spawn(a), Running::spawn(b));
    assert_eq!(
        a.wait(BOUND).code(),
        0,
        "both shared holders saw each other"
    );
    assert_eq!(b.wait(BOUND).code(), 0);
}

#[test]
fn counted_runs_count_the_holders_by_their_own_limit() {
    let agent = Agent::start();
    let dirs: Vec<TempDir> = (0..3)
        .map(|i| TempDir::new(&format!("counted{i}")))
        .collect();
    let holders: Vec<Running> = dirs
        .iter()
        .map(|d| hold_with(&agent, d, "db", &["--counted", "3"]))
        .collect();
    // Full at 3; a run made with 6 has room.
    let mut cmd = agent.cli();
    cmd.args(["lock", "-n", "--counted", "3", "db", "true"]);
    assert_eq!(run(cmd, BOUND).code(), 1, "full at 3");
    let mut cmd = agent.cli();
    cmd.args(["lock", "-n", "--counted", "6", "db", "true"]);
    assert_eq!(run(cmd, BOUND).code(), 0, "room at 6");
    for (d, h) in dirs.iter().zip(holders) {
        release(d, h);
    }
}

#[test]
fn runs_on_one_name_never_overlap_and_their_fences_increase() {
    let agent = Agent::start();
    let dir = TempDir::new("overlap");
    let log = dir.path("log");
    let script = format!(
        "echo \"start $(date +%s.%N) $SNAPLOCK_FENCE\" >> '{0}'; sleep 0.2; echo \"end $(date +%s.%N)\" >> '{0}'",
        log.display()
    );
    let runs: Vec<Running> = (0..4)
        .map(|_| {
            let mut cmd = agent.cli();
            cmd.args(["lock", "-w", "10", "same", "--"])
                .args(sh(&script));
            Running::spawn(cmd)
        })
        .collect();
    for r in runs {
        let done = r.wait(BOUND);
        assert_eq!(done.code(), 0, "{done:?}");
    }
    let text = fs::read_to_string(&log).expect("log");
    let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split(' ').collect()).collect();
    assert_eq!(lines.len(), 8, "{text}");
    let mut last_end = 0.0f64;
    let mut last_fence = 0u64;
    for pair in lines.chunks(2) {
        assert_eq!(
            (pair[0][0], pair[1][0]),
            ("start", "end"),
            "a start and its end, never interleaved:\n{text}"
        );
        let start: f64 = pair[0][1].parse().expect("time");
        let end: f64 = pair[1][1].parse().expect("time");
        let fence: u64 = pair[0][2].parse().expect("fence");
        assert!(start >= last_end && end >= start, "overlap:\n{text}");
        assert!(fence > last_fence, "fences must increase:\n{text}");
        (last_end, last_fence) = (end, fence);
    }
}

#[test]
fn renewal_keeps_a_short_lease_alive_while_the_command_runs() {
    let agent = Agent::start();
    let mut cmd = agent.cli();
    cmd.args(["lock", "-d", "2", "renewed", "sleep", "5"]);
    let done = run(cmd, BOUND);
    assert_eq!(done.code(), 0, "{done:?}");
    assert!(done.took >= Duration::from_secs(5), "{done:?}");
    assert!(done.stderr.is_empty(), "{done:?}");
}

#[test]
fn a_killed_agent_makes_the_cli_stop_the_command_and_exit_75() {
    let mut agent = Agent::start();
    let dir = TempDir::new("agentkill");
    let (ready, termed) = (dir.path("ready"), dir.path("termed"));
    let script = format!(
        "trap 'touch \"{}\"; exit 0' TERM; touch '{}'; {SLEEP_LOOP}",
        termed.display(),
        ready.display()
    );
    let mut cmd = agent.cli();
    cmd.args(["lock", "-d", "10", "doomed", "--"])
        .args(sh(&script));
    let running = Running::spawn(cmd);
    wait_for_file(&ready, Duration::from_secs(10));
    let killed = now();
    agent.kill9();
    let done = running.wait(BOUND);
    assert_eq!(done.code(), 75, "{done:?}");
    assert!(
        killed.elapsed() < Duration::from_secs(2),
        "the CLI must react at once: {done:?}"
    );
    assert!(termed.exists(), "the command got SIGTERM");
    assert!(done.stderr.contains("lost"), "{done:?}");
}

#[test]
fn a_stalled_agent_makes_the_cli_stop_the_command_before_the_lease_ends() {
    let agent = Agent::start();
    let dir = TempDir::new("stall");
    let ready = dir.path("ready");
    // The command ignores SIGTERM: only the SIGKILL ends it.
    let script = format!(
        "trap '' TERM; touch '{}'; i=0; while [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done",
        ready.display()
    );
    let mut cmd = agent.cli();
    cmd.args(["lock", "-d", "2", "stalled", "--"])
        .args(sh(&script));
    let running = Running::spawn(cmd);
    wait_for_file(&ready, Duration::from_secs(10));
    agent.signal(Signal::SIGSTOP);
    let done = running.wait(BOUND);
    agent.signal(Signal::SIGCONT);
    assert_eq!(done.code(), 75, "{done:?}");
    // Granted at about the start; the SIGKILL is due 0.2 s before the 2 s
    // lease ends, and the first renewal at 0.67 s is never answered.
    assert!(
        done.took < Duration::from_millis(2000),
        "killed before the lease end: {done:?}"
    );
    assert!(done.took > Duration::from_millis(1000), "{done:?}");
    assert!(done.stderr.contains("renewal"), "{done:?}");
}

#[test]
fn signals_to_the_cli_are_passed_to_the_command_and_the_lock_is_released() {
    let agent = Agent::start();
    let dir = TempDir::new("forward");
    let (ready, got) = (dir.path("ready"), dir.path("got"));
    let script = format!(
        "trap 'echo TERM > \"{}\"; exit 3' TERM; touch '{}'; {SLEEP_LOOP}",
        got.display(),
        ready.display()
    );
    let mut cmd = agent.cli();
    cmd.args(["lock", "fwd", "--"]).args(sh(&script));
    let running = Running::spawn(cmd);
    wait_for_file(&ready, Duration::from_secs(10));
    kill(running.pid(), Signal::SIGTERM).expect("signal the CLI");
    let done = running.wait(BOUND);
    assert_eq!(done.code(), 3, "the command's own status: {done:?}");
    assert_eq!(
        fs::read_to_string(&got).expect("the command got it").trim(),
        "TERM"
    );
    let mut cmd = agent.cli();
    cmd.args(["lock", "-n", "fwd", "true"]);
    assert_eq!(run(cmd, BOUND).code(), 0, "the lock was released");
}

#[test]
fn the_cli_exits_within_milliseconds_of_the_command() {
    let agent = Agent::start();
    let dir = TempDir::new("latency");
    let ended = dir.path("ended");
    let mut cmd = agent.cli();
    cmd.args(["lock", "quick", "--"])
        .args(sh(&format!("sleep 0.3; touch '{}'", ended.display())));
    let running = Running::spawn(cmd);
    wait_for_file(&ended, Duration::from_secs(10));
    let seen = now();
    let done = running.wait(BOUND);
    assert_eq!(done.code(), 0, "{done:?}");
    let after = seen.elapsed();
    // Not a speed figure (bench/ has those): a CLI that waited for its
    // next timer (a renewal, a poll interval) before noticing the end
    // would take a second or more; half a second leaves room for a loaded
    // machine.
    assert!(
        after < Duration::from_millis(500),
        "exited {after:?} after the command ended"
    );
}

#[test]
fn a_stopping_agent_makes_the_cli_stop_the_command_and_exit_75() {
    let agent = Agent::start();
    let dir = TempDir::new("agentstop");
    let (ready, termed) = (dir.path("ready"), dir.path("termed"));
    let script = format!(
        "trap 'touch \"{}\"; exit 0' TERM; touch '{}'; {SLEEP_LOOP}",
        termed.display(),
        ready.display()
    );
    let mut cmd = agent.cli();
    cmd.args(["lock", "-d", "10", "stopping", "--"])
        .args(sh(&script));
    let running = Running::spawn(cmd);
    wait_for_file(&ready, Duration::from_secs(10));
    let stopped = now();
    agent.signal(Signal::SIGTERM);
    let done = running.wait(BOUND);
    assert_eq!(done.code(), 75, "{done:?}");
    assert!(stopped.elapsed() < Duration::from_secs(2), "{done:?}");
    assert!(termed.exists(), "the command got SIGTERM");
}

#[test]
fn the_command_starts_with_no_signal_blocked_and_sigpipe_at_its_default() {
    let agent = Agent::start();
    let mut cmd = agent.cli();
    cmd.args([
        "lock",
        "mask",
        "grep",
        "^Sig\\(Blk\\|Ign\\):",
        "/proc/self/status",
    ]);
    let done = run(cmd, BOUND);
    assert_eq!(done.code(), 0, "{done:?}");
    let mask = |name: &str| {
        let line = done
            .stdout
            .lines()
            .find(|l| l.starts_with(name))
            .expect("the line");
        u64::from_str_radix(line.split_whitespace().nth(1).expect("a mask"), 16).expect("hex")
    };
    assert_eq!(mask("SigBlk:"), 0, "{done:?}");
    assert_eq!(
        mask("SigIgn:") & (1 << (13 - 1)),
        0,
        "SIGPIPE is not ignored: {done:?}"
    );
}

#[test]
fn a_lost_lock_stops_every_process_the_command_started() {
    let mut agent = Agent::start();
    let dir = TempDir::new("tree");
    let tree = Tree::new("tree");
    let mut cmd = agent.cli();
    tree.mark(&mut cmd);
    cmd.args(["lock", "-d", "8", "job", "--"])
        .args(sh("sleep 97; echo after"));
    let running = Running::spawn(cmd);
    tree.wait_for("sleep 97", Duration::from_secs(10));
    let lost = now();
    agent.kill9();
    let done = running.wait(BOUND);
    assert_eq!(done.code(), 75, "{done:?}");
    // The grace of an 8 s lease is 2 s; `sh` and `sleep` both die of the
    // SIGTERM at once.
    let gone = tree.wait_gone(Duration::from_secs(3));
    let took = lost.elapsed();
    assert!(
        gone.is_ok(),
        "left running after the lock was lost: {gone:?}"
    );
    assert!(took < Duration::from_secs(3), "{took:?}");
    eprintln!("lost lock to the end of the process tree: {took:?}");
    assert!(!done.stdout.contains("after"), "{done:?}");
    drop(dir);
}

#[test]
fn processes_that_ignore_sigterm_get_sigkill_after_the_grace() {
    let mut agent = Agent::start();
    let tree = Tree::new("deaf");
    let mut cmd = agent.cli();
    tree.mark(&mut cmd);
    // Both the shell and its child ignore SIGTERM.
    cmd.args(["lock", "-d", "2", "deaf", "--"]).args(sh(
        "trap '' TERM; sh -c 'trap \"\" TERM; sleep 97'; echo after",
    ));
    let running = Running::spawn(cmd);
    tree.wait_for("sleep 97", Duration::from_secs(10));
    let lost = now();
    agent.kill9();
    let done = running.wait(BOUND);
    let took = lost.elapsed();
    assert_eq!(done.code(), 75, "{done:?}");
    assert!(tree.live().is_empty(), "{:?}", tree.live());
    // SIGKILL after the grace, a quarter of the 2 s lease.
    assert!(took >= Duration::from_millis(450), "{took:?}");
    assert!(took < Duration::from_millis(1500), "{took:?}");
    assert!(!done.stdout.contains("after"), "{done:?}");
}

#[test]
fn the_lock_is_held_until_every_process_of_the_group_has_ended() {
    let agent = Agent::start();
    let dir = TempDir::new("leftover");
    let tree = Tree::new("leftover");
    let ended = dir.path("ended");
    let mut cmd = agent.cli();
    tree.mark(&mut cmd);
    // The command exits at once; a process it started in the background
    // goes on for 1 s.
    cmd.args(["lock", "leftover", "--"]).args(sh(&format!(
        "(sleep 1; touch '{}') & exit 4",
        ended.display()
    )));
    let running = Running::spawn(cmd);
    tree.wait_for("sleep 1", Duration::from_secs(10));
    let mut other = agent.cli();
    other.args(["lock", "-n", "leftover", "true"]);
    assert_eq!(run(other, BOUND).code(), 1, "still held");
    let done = running.wait(BOUND);
    assert!(ended.exists(), "the lock outlived the background process");
    assert_eq!(done.code(), 4, "the command's own status: {done:?}");
    let mut other = agent.cli();
    other.args(["lock", "-n", "leftover", "true"]);
    assert_eq!(run(other, BOUND).code(), 0, "released");
}

#[test]
fn after_sigkill_of_the_cli_no_other_holder_runs_while_the_command_lives() {
    let agent = Agent::start();
    let first = Tree::new("first");
    let mut cmd = agent.cli();
    first.mark(&mut cmd);
    cmd.args(["lock", "job", "--"])
        .args(sh("sleep 6; echo after"));
    let running = Running::spawn(cmd);
    first.wait_for("sleep 6", Duration::from_secs(10));
    let killed = now();
    kill(running.pid(), Signal::SIGKILL).expect("kill the CLI");
    let done = running.wait(BOUND);
    assert_eq!(done.status.code(), None, "killed: {done:?}");
    // The second holder's command looks for any live process of the first.
    let check = format!(
        "for e in /proc/[0-9]*/environ; do \
           if grep -q 'SNAPLOCK_TEST_TREE={}' \"$e\" 2>/dev/null; then echo \"$e\"; exit 9; fi; \
         done; exit 0",
        first.token
    );
    let mut ran = None;
    for _ in 0..200 {
        let mut second = agent.cli();
        second.args(["lock", "-n", "job", "--"]).args(sh(&check));
        let got = run(second, BOUND);
        match got.code() {
            1 => std::thread::sleep(Duration::from_millis(5)),
            0 => {
                ran = Some(killed.elapsed());
                break;
            }
            _ => panic!("the second holder ran beside the first command: {got:?}"),
        }
    }
    let after = ran.expect("the lock is free again once the first command is gone");
    eprintln!("SIGKILL of the CLI to the next grant: {after:?}");
    assert!(after < Duration::from_secs(3), "{after:?}");
    assert!(first.live().is_empty(), "{:?}", first.live());
    assert!(!done.stdout.contains("after"), "{done:?}");
}

#[test]
fn killing_every_snaplock_cli_by_name_leaves_the_guard_to_stop_the_command() {
    let agent = Agent::start();
    let tree = Tree::new("byname");
    let mut cmd = agent.cli();
    tree.mark(&mut cmd);
    cmd.args(["lock", "byname", "--"])
        .args(sh("sleep 7; echo after"));
    let running = Running::spawn(cmd);
    tree.wait_for("sleep 7", Duration::from_secs(10));
    // What `killall -9 snaplock-cli` would kill: the processes of the tree
    // named snaplock-cli.
    let named: Vec<i32> = tree
        .live()
        .into_iter()
        .filter(|(pid, _)| {
            fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.trim() == "snaplock-cli")
        })
        .map(|(pid, _)| pid)
        .collect();
    assert_eq!(named, vec![running.pid().as_raw()], "only the CLI itself");
    kill(running.pid(), Signal::SIGKILL).expect("kill the CLI");
    let _ = running.wait(BOUND);
    let gone = tree.wait_gone(Duration::from_secs(3));
    assert!(gone.is_ok(), "{gone:?}");
}

#[test]
fn a_killed_guard_makes_the_cli_kill_the_command_and_exit_70() {
    let agent = Agent::start();
    let tree = Tree::new("guard");
    let mut cmd = agent.cli();
    tree.mark(&mut cmd);
    cmd.args(["lock", "guarded", "--"])
        .args(sh("sleep 7; echo after"));
    let running = Running::spawn(cmd);
    tree.wait_for("sleep 7", Duration::from_secs(10));
    let guard: Vec<i32> = tree
        .live()
        .into_iter()
        .filter(|(pid, _)| {
            fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.trim() == "snaplock-guard")
        })
        .map(|(pid, _)| pid)
        .collect();
    assert_eq!(guard.len(), 1, "{:?}", tree.live());
    kill(nix::unistd::Pid::from_raw(guard[0]), Signal::SIGKILL).expect("kill the guard");
    let done = running.wait(BOUND);
    assert_eq!(done.code(), 70, "{done:?}");
    assert!(done.stderr.contains("guard"), "{done:?}");
    let gone = tree.wait_gone(Duration::from_secs(3));
    assert!(gone.is_ok(), "{gone:?}");
}

#[test]
fn a_command_run_from_a_terminal_can_read_it() {
    // script(1) runs snaplock-cli on a terminal of its own, in the
    // terminal's foreground group; a command in a background group that
    // reads the terminal would be stopped (SIGTTIN) and never end.
    let agent = Agent::start();
    let tree = Tree::new("tty");
    let inner = format!(
        "{} --socket '{}' lock tty -- sh -c 'read x; echo got:\\$x; exit 3'",
        common::CLI,
        agent.socket.display()
    );
    let outer = format!("(sleep 0.5; echo hello; sleep 3) | script -qec \"{inner}\" /dev/null");
    let mut cmd = std::process::Command::new("sh");
    cmd.args(["-c", &outer]).stdin(std::process::Stdio::null());
    tree.mark(&mut cmd);
    let done = Running::spawn(cmd).wait(Duration::from_secs(10));
    assert_eq!(
        done.code(),
        3,
        "the command's status through script -e: {done:?}"
    );
    assert!(done.stdout.contains("got:hello"), "{done:?}");
}
