//! `snaplock-cli tx` against a real agent: a commit prints its fence and
//! results (0), a false assert prints the statement (1), a bad statement
//! is the agent's refusal (70), a bad command line is a usage error (64).

mod common;

use std::time::Duration;

use common::{Agent, run};
use snaplock_client::Client;
use snaplock_client::wire::{Message, parse};

const BOUND: Duration = Duration::from_secs(20);

const ENTRY: &str = "MDS-Entry/CGROVE-35/R-45899";

fn review(agent: &Agent) -> std::process::Command {
    let mut cmd = agent.cli();
    cmd.args([
        "tx",
        "-N",
        "Clinical",
        "assert not exists Month-End/CGROVE-35",
        &format!("assert not exists {ENTRY}"),
        "assert set MDS-Review/CGROVE-35/R-45899",
    ]);
    cmd
}

#[test]
fn a_review_commits_then_fails_at_statement_2_while_an_entry_is_held() {
    let agent = Agent::start();
    let done = run(review(&agent), BOUND);
    assert_eq!(done.code(), 0, "{done:?}");
    let lines: Vec<&str> = done.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{done:?}");
    assert!(lines[0].starts_with("fence: "), "{done:?}");
    assert_eq!(lines[1], "results: 1,1,1", "{done:?}");
    let first: u64 = lines[0]["fence: ".len()..].parse().expect("a fence");

    // Somebody enters data and keeps its connection.
    let mut entry = Client::connect(&agent.socket).expect("connected");
    let line = format!("TRANSACTION namespace=Clinical;s1=\"set {ENTRY} dup\";tag=1");
    let reply = entry
        .request(&parse(line.as_bytes()).expect("a message"), BOUND)
        .expect("a reply");
    assert_eq!(reply.command, "TRANSACTIONOK", "{reply}");

    let done = run(review(&agent), BOUND);
    assert_eq!(done.code(), 1, "{done:?}");
    assert_eq!(done.stdout, "", "{done:?}");
    assert_eq!(
        done.stderr,
        format!("snaplock-cli: tx: s2 is false: assert not exists {ENTRY}\n"),
        "{done:?}"
    );

    // The entry is done when its connection ends.
    drop(entry);
    let deadline = common::now() + BOUND;
    loop {
        let done = run(cmd_clone(&agent, &format!("exists {ENTRY}")), BOUND);
        assert_eq!(done.code(), 0, "{done:?}");
        if done.stdout.ends_with("results: 0\n") {
            let fence: u64 = done.stdout["fence: ".len()..done.stdout.find('\n').unwrap()]
                .parse()
                .expect("a fence");
            assert!(fence > first, "{fence} > {first}");
            break;
        }
        assert!(common::now() < deadline, "{done:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn cmd_clone(agent: &Agent, statement: &str) -> std::process::Command {
    let mut cmd = agent.cli();
    cmd.args(["tx", "-N", "Clinical", statement]);
    cmd
}

#[test]
fn what_the_agent_refuses_is_a_software_error_and_a_bad_command_line_a_usage_error() {
    let agent = Agent::start();
    let mut cmd = agent.cli();
    cmd.args(["tx", "-N", "n", "exists A", "frob B"]);
    let done = run(cmd, BOUND);
    assert_eq!(done.code(), 70, "{done:?}");
    assert!(
        done.stderr.contains("invalid") && done.stderr.contains("s2 column 1"),
        "{done:?}"
    );
    let mut cmd = agent.cli();
    cmd.args(["tx", "-N", "bad/namespace", "exists A"]);
    assert_eq!(run(cmd, BOUND).code(), 70);
    for args in [
        &["tx", "exists A"][..],
        &["tx", "-N", "n"],
        &["tx", "-N", "n", "-d", "0", "exists A"],
    ] {
        let mut cmd = agent.cli();
        cmd.args(args);
        let done = run(cmd, BOUND);
        assert_eq!(done.code(), 64, "{args:?}: {done:?}");
    }
    // The agent is unharmed.
    let mut client = Client::connect(&agent.socket).expect("connected");
    let reply = client
        .request(&Message::new("LOCKSTATUS"), BOUND)
        .expect("a reply");
    assert_eq!(reply.command, "LOCKREADY");
}
