//! `snaplock-cli tx ... -- COMMAND` against a real agent (and, for what
//! today's agent never sends, a scripted one): the command runs while the
//! connection holds the variables, they are renewed, they vanish when it
//! ends, and their loss stops it with exit 75.

mod common;

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::thread;
use std::time::Duration;

use common::{Agent, Running, TempDir, now, run, sh, wait_for_file};

const BOUND: Duration = Duration::from_secs(20);

const ENTRY: &str = "MDS-Entry/CGROVE-35/R-45899";
const REVIEW: &str = "MDS-Review/CGROVE-35/R-45899";

/// Sleeps up to 15 s in short foreground steps, so a trapped signal runs
/// its trap within 50 ms.
const SLEEP_LOOP: &str = "i=0; while [ $i -lt 300 ]; do sleep 0.05; i=$((i+1)); done";

/// The statements of an MDS entry (snaplock(7), TRANSACTIONS, Example).
fn entry() -> [String; 3] {
    [
        "assert not exists Month-End/CGROVE-35".to_owned(),
        format!("assert not exists {REVIEW}"),
        format!("assert set {ENTRY} dup"),
    ]
}

/// The statements of a review: entries and reviews exclude each other.
fn review() -> [String; 3] {
    [
        "assert not exists Month-End/CGROVE-35".to_owned(),
        format!("assert not exists {ENTRY}"),
        format!("assert set {REVIEW}"),
    ]
}

/// `tx -N Clinical STATEMENT` without a command: its `results:` line.
fn results_of(agent: &Agent, statement: &str) -> String {
    let mut cmd = agent.cli();
    cmd.args(["tx", "-N", "Clinical", statement]);
    let done = run(cmd, BOUND);
    assert_eq!(done.code(), 0, "{done:?}");
    done.stdout
        .lines()
        .find_map(|l| l.strip_prefix("results: "))
        .unwrap_or_else(|| panic!("no results: {done:?}"))
        .to_owned()
}

/// A command that says it runs, waits for `go` (at most 20 s), prints its
/// environment and exits with 3.
fn waiting_script(dir: &TempDir) -> String {
    format!(
        "touch '{}'; i=0; while [ ! -e '{}' ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done; \
         echo \"$SNAPLOCK_TX_NAMESPACE|$SNAPLOCK_TX_FENCE|$SNAPLOCK_TX_RESULTS\"; exit 3",
        dir.path("running").display(),
        dir.path("go").display()
    )
}

#[test]
fn the_variables_are_held_while_the_command_runs_and_vanish_when_it_exits() {
    let agent = Agent::start();
    let dir = TempDir::new("txheld");
    let mut cmd = agent.cli();
    cmd.args(["tx", "-N", "Clinical"])
        .args(entry())
        .arg("--")
        .args(sh(&waiting_script(&dir)));
    let running = Running::spawn(cmd);
    wait_for_file(&dir.path("running"), Duration::from_secs(10));

    // Meanwhile the entry is there: another entry runs along, a review
    // fails at s2.
    assert_eq!(results_of(&agent, &format!("exists {ENTRY}")), "1");
    let mut other = agent.cli();
    other.args(["tx", "-N", "Clinical"]).args(entry());
    let done = run(other, BOUND);
    assert_eq!(done.code(), 0, "a second entry: {done:?}");
    let mut rev = agent.cli();
    rev.args(["tx", "-N", "Clinical"]).args(review());
    let done = run(rev, BOUND);
    assert_eq!(done.code(), 1, "{done:?}");
    assert!(done.stderr.contains("s2 is false"), "{done:?}");

    fs::write(dir.path("go"), b"").expect("go");
    let done = running.wait(BOUND);
    assert_eq!(done.code(), 3, "the command's status: {done:?}");
    assert!(done.stderr.is_empty(), "{done:?}");
    let fields: Vec<&str> = done.stdout.trim_end().split('|').collect();
    assert_eq!(fields.len(), 3, "{done:?}");
    assert_eq!(fields[0], "Clinical");
    assert!(fields[1].parse::<u64>().is_ok_and(|f| f > 0), "{done:?}");
    assert_eq!(fields[2], "1,1,1");

    // snaplock-cli has exited: its connection, and the entry, are gone (as
    // soon as the agent has read the close).
    let exited = now();
    while results_of(&agent, &format!("exists {ENTRY}")) != "0" {
        assert!(exited.elapsed() < Duration::from_secs(2), "the entry stays");
        thread::sleep(Duration::from_millis(20));
    }
    let mut rev = agent.cli();
    rev.args(["tx", "-N", "Clinical"]).args(review());
    assert_eq!(run(rev, BOUND).code(), 0);
}

#[test]
fn a_failed_assert_does_not_run_the_command() {
    let agent = Agent::start();
    let dir = TempDir::new("txfailed");
    let holder = {
        let mut cmd = agent.cli();
        cmd.args(["tx", "-N", "Clinical"])
            .args(entry())
            .arg("--")
            .args(sh(&waiting_script(&dir)));
        Running::spawn(cmd)
    };
    wait_for_file(&dir.path("running"), Duration::from_secs(10));

    let ran = dir.path("ran");
    let mut cmd = agent.cli();
    cmd.args(["tx", "-N", "Clinical"])
        .args(review())
        .arg("--")
        .args(sh(&format!("touch '{}'", ran.display())));
    let done = run(cmd, BOUND);
    assert_eq!(done.code(), 1, "{done:?}");
    assert_eq!(done.stdout, "", "{done:?}");
    assert_eq!(
        done.stderr,
        format!("snaplock-cli: tx: s2 is false: assert not exists {ENTRY}\n")
    );
    assert!(!ran.exists(), "the command ran");

    // What the agent refuses does not run either.
    let mut cmd = agent.cli();
    cmd.args(["tx", "-N", "Clinical", "frob A", "--"])
        .args(sh(&format!("touch '{}'", ran.display())));
    assert_eq!(run(cmd, BOUND).code(), 70);
    assert!(!ran.exists(), "the command ran");

    fs::write(dir.path("go"), b"").expect("go");
    assert_eq!(holder.wait(BOUND).code(), 3);
}

#[test]
fn renewal_keeps_variables_of_two_seconds_alive_across_a_five_second_command() {
    let agent = Agent::start();
    let mut cmd = agent.cli();
    cmd.args([
        "tx",
        "-N",
        "n",
        "-d",
        "2",
        "-p",
        "5",
        "assert set V/1",
        "--",
    ])
    .args(["sleep", "5"]);
    let running = Running::spawn(cmd);
    let started = now();
    // Well past the two seconds of the first transaction.
    thread::sleep(Duration::from_millis(3500));
    let mut probe = agent.cli();
    probe.args(["tx", "-N", "n", "exists V/1", "set V/1"]);
    let seen = run(probe, BOUND);
    assert!(started.elapsed() < Duration::from_secs(5), "{seen:?}");
    assert_eq!(seen.code(), 0, "{seen:?}");
    assert!(seen.stdout.ends_with("results: 1,0\n"), "{seen:?}");
    let done = running.wait(BOUND);
    assert_eq!(done.code(), 0, "{done:?}");
    assert!(done.took >= Duration::from_secs(5), "{done:?}");
    assert!(done.stderr.is_empty(), "{done:?}");
}

#[test]
fn a_transaction_that_sets_nothing_still_runs_its_command() {
    let agent = Agent::start();
    let mut cmd = agent.cli();
    cmd.args(["tx", "-N", "n", "-d", "1", "exists X", "-c"])
        .arg("sleep 1.5; echo \"$SNAPLOCK_TX_RESULTS\"");
    let done = run(cmd, BOUND);
    assert_eq!(done.code(), 0, "{done:?}");
    assert_eq!(done.stdout, "0\n", "{done:?}");
    assert!(done.stderr.is_empty(), "{done:?}");
}

#[test]
fn a_killed_agent_stops_the_command_and_exits_75() {
    let mut agent = Agent::start();
    let dir = TempDir::new("txagentkill");
    let (ready, termed) = (dir.path("ready"), dir.path("termed"));
    let script = format!(
        "trap 'touch \"{}\"; exit 0' TERM; touch '{}'; {SLEEP_LOOP}",
        termed.display(),
        ready.display()
    );
    let mut cmd = agent.cli();
    cmd.args(["tx", "-N", "n", "-d", "10", "set A", "--"])
        .args(sh(&script));
    let running = Running::spawn(cmd);
    wait_for_file(&ready, Duration::from_secs(10));
    let killed = now();
    agent.kill9();
    let done = running.wait(BOUND);
    assert_eq!(done.code(), 75, "{done:?}");
    assert!(killed.elapsed() < Duration::from_secs(2), "{done:?}");
    assert!(termed.exists(), "the command got SIGTERM");
    assert!(
        done.stderr.contains("variables of namespace n lost"),
        "{done:?}"
    );
}

/// A scripted agent on `path`: answers the first TRANSACTION with
/// TRANSACTIONOK, then each later one with `renewal`'s line (or nothing),
/// and once `trigger` exists sends `notice` unasked. Every line it read is
/// handed back when the client leaves.
fn scripted_agent(
    path: &Path,
    renewal: Option<&'static str>,
    trigger: &Path,
    notice: Option<&'static str>,
) -> thread::JoinHandle<Vec<String>> {
    let listener = UnixListener::bind(path).expect("bind");
    let trigger = trigger.to_path_buf();
    thread::spawn(move || {
        let (stream, _) = listener.accept().expect("accept");
        stream
            .set_read_timeout(Some(Duration::from_millis(20)))
            .expect("timeout");
        let mut reader = BufReader::new(stream.try_clone().expect("clone"));
        let mut writer = stream;
        let mut lines = Vec::new();
        let mut transactions = 0;
        let mut noticed = false;
        // A line cut by the read timeout goes on in the next read.
        let mut line = String::new();
        let start = now();
        while start.elapsed() < BOUND {
            if !noticed && trigger.exists() {
                noticed = true;
                if let Some(line) = notice {
                    let _ = writer.write_all(line.as_bytes());
                }
            }
            match reader.read_line(&mut line) {
                Ok(0) => break,
                Ok(_) if line.ends_with('\n') => {}
                Ok(_) | Err(_) => continue,
            }
            let tag = line
                .trim_end()
                .rsplit(';')
                .find_map(|p| p.strip_prefix("tag="))
                .unwrap_or("0")
                .to_owned();
            if line.starts_with("TRANSACTION ") {
                transactions += 1;
                let reply = if transactions == 1 {
                    Some(format!(
                        "TRANSACTIONOK fence=77;namespace=n;results=1;tag={tag}\n"
                    ))
                } else {
                    renewal.map(|r| r.replace("TAG", &tag))
                };
                if let Some(reply) = reply {
                    let _ = writer.write_all(reply.as_bytes());
                }
            }
            lines.push(std::mem::take(&mut line));
        }
        lines
    })
}

/// Runs `tx -N n -d 1.5 'set A' -- COMMAND` against a scripted agent, the
/// command marking `ready` and, on SIGTERM, `termed`.
fn against_script(
    renewal: Option<&'static str>,
    notice: Option<&'static str>,
) -> (common::Run, Vec<String>, bool) {
    let dir = TempDir::new("txscripted");
    let socket = dir.path("s.sock");
    let (ready, termed) = (dir.path("ready"), dir.path("termed"));
    let agent = scripted_agent(&socket, renewal, &ready, notice);
    let script = format!(
        "trap 'touch \"{}\"; exit 0' TERM; touch '{}'; {SLEEP_LOOP}",
        termed.display(),
        ready.display()
    );
    let mut cmd = std::process::Command::new(common::CLI);
    cmd.arg("--socket")
        .arg(&socket)
        .args(["tx", "-N", "n", "-d", "1.5", "set A", "--"])
        .args(sh(&script));
    let done = run(cmd, BOUND);
    let lines = agent.join().expect("the scripted agent ran");
    (done, lines, termed.exists())
}

#[test]
fn a_revocation_notice_stops_the_command_and_exits_75() {
    let (done, lines, termed) = against_script(
        Some("TRANSACTIONOK fence=78;namespace=n;results=1;tag=TAG\n"),
        Some(
            "TRANSACTIONFAILED description=\"revoked: no contact with the leaders\";\
             error=unavailable;failed=0;namespace=n\n",
        ),
    );
    assert_eq!(done.code(), 75, "{done:?}");
    assert!(termed, "the command got SIGTERM: {done:?}");
    assert!(
        done.stderr.contains("revoked: no contact with the leaders"),
        "{done:?}"
    );
    assert!(done.took < Duration::from_secs(5), "{done:?}");
    assert!(lines[0].starts_with("TRANSACTION "), "{lines:?}");
}

#[test]
fn a_failed_renewal_stops_the_command_and_exits_75() {
    let (done, lines, termed) = against_script(
        Some(
            "TRANSACTIONFAILED description=s1 is false;error=failed;failed=1;\
             namespace=n;tag=TAG\n",
        ),
        None,
    );
    assert_eq!(done.code(), 75, "{done:?}");
    assert!(termed, "the command got SIGTERM: {done:?}");
    assert!(done.stderr.contains("the renewal failed"), "{done:?}");
    // The renewal came about a third of the duration in, and asserted
    // the variable again, with the same duration.
    let renewal = lines
        .iter()
        .filter(|l| l.starts_with("TRANSACTION "))
        .nth(1)
        .expect("a renewal");
    assert!(
        renewal.starts_with("TRANSACTION duration=1.5;namespace=n;s1=assert set A;tag="),
        "{renewal}"
    );
}

#[test]
fn an_unconfirmed_renewal_stops_the_command_before_the_variables_lapse() {
    let (done, _, termed) = against_script(None, None);
    assert_eq!(done.code(), 75, "{done:?}");
    assert!(termed, "the command got SIGTERM: {done:?}");
    assert!(done.stderr.contains("in time"), "{done:?}");
    // Stopped, and even killed, before 1.5 s from the commit.
    assert!(done.took < Duration::from_millis(1500), "{done:?}");
}
