//! `snaplock-cli lock` against an agent of a three-agent cluster that
//! loses contact with the two others: the command gets its whole grace
//! between SIGTERM and SIGKILL, before what the agent vouched for ends.

mod common;

use std::net::TcpListener;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{Agent, Running, TempDir, now, run, sh, wait_for_file};
use nix::sys::signal::Signal;
use snaplock_client::{Client, LockOptions, clock};

/// Three agents, each on its own loopback address (127.a.b.1-3, with a, b
/// from the test's pid), so that no other test's socket can take a port.
fn cluster() -> Vec<Agent> {
    let pid = std::process::id();
    let base = format!("127.{}.{}", 10 + (pid >> 8) % 200, pid % 250 + 1);
    let addrs: Vec<String> = (1..=3)
        .map(|i| {
            let ip = format!("{base}.{i}");
            let l = TcpListener::bind((ip.as_str(), 0)).expect("a loopback port");
            format!("{ip}:{}", l.local_addr().expect("addr").port())
        })
        .collect();
    let agents: Vec<Agent> = addrs
        .iter()
        .enumerate()
        .map(|(i, addr)| {
            Agent::start_with(&[
                "-n".into(),
                format!("node{i}"),
                "--listen".into(),
                addr.clone(),
                "--neighbors".into(),
                addrs.join(","),
            ])
        })
        .collect();
    let start = now();
    for a in &agents {
        loop {
            let mut status = a.cli();
            status.arg("status");
            if run(status, Duration::from_secs(10)).code() == 0 {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "the cluster was not ready within 30 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    agents
}

#[allow(clippy::disallowed_methods)] // compared with the command's `date`
fn wall_secs() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64()
}

#[test]
fn on_lost_contact_the_command_gets_its_grace_before_the_vouch_ends() {
    let agents = cluster();
    let dir = TempDir::new("contact");
    let (ready, termed) = (dir.path("ready"), dir.path("termed"));
    // The command notes when SIGTERM comes and goes on: only SIGKILL ends it.
    let script = format!(
        "trap 'date +%s.%N > \"{}\"' TERM; touch '{}'; \
         i=0; while [ $i -lt 2000 ]; do sleep 0.01; i=$((i+1)); done",
        termed.display(),
        ready.display()
    );
    let mut cmd = agents[0].cli();
    cmd.args(["lock", "-d", "8", "contact", "--"])
        .args(sh(&script));
    let running = Running::spawn(cmd);
    wait_for_file(&ready, Duration::from_secs(10));
    // A library holder beside it, on the same agent.
    let mut holder = Client::connect(&agents[0].socket).expect("connect");
    holder
        .lock(b"library", &LockOptions::default())
        .expect("granted");
    // Let a few ALIVE answers come while in contact.
    std::thread::sleep(Duration::from_millis(1500));
    let asked = clock::monotonic();
    let in_contact = holder
        .vouched_for()
        .expect("answered")
        .expect("a cluster agent vouches for a time");
    let left = in_contact - asked;
    assert!(
        left > Duration::from_secs(3) && left <= Duration::from_millis(5100),
        "about the agent's grace (5 s) while in contact: {left:?}"
    );
    let cut = now();
    let cut_at = clock::monotonic();
    agents[1].signal(Signal::SIGSTOP);
    agents[2].signal(Signal::SIGSTOP);
    let done = running.wait(Duration::from_secs(20));
    let ended = wall_secs();
    let asked = clock::monotonic();
    let out_of_contact = holder
        .vouched_for()
        .expect("answered")
        .expect("a cluster agent vouches for a time");
    agents[1].signal(Signal::SIGCONT);
    agents[2].signal(Signal::SIGCONT);
    assert_eq!(done.code(), 75, "{done:?}");
    let term: f64 = std::fs::read_to_string(&termed)
        .expect("the command got SIGTERM")
        .trim()
        .parse()
        .expect("a date");
    let gap = ended - term;
    eprintln!(
        "contact cut to exit: {:?}; SIGTERM to the end (SIGKILL): {gap:.3} s",
        cut.elapsed()
    );
    // The grace of an 8 s lease is 2 s; the agent's default grace (5 s) is
    // what it vouches for in contact, and 2/5 of it is 2 s too.
    assert!(
        gap > 1.8 && gap < 2.5,
        "SIGTERM to SIGKILL: {gap:.3} s: {done:?}"
    );
    assert!(done.stderr.contains("lost contact"), "{done:?}");
    // All happened within what the agent vouched for: its grace (5 s)
    // after its last contact.
    assert!(cut.elapsed() < Duration::from_secs(5), "{done:?}");
    // What the agent vouches for no longer moves on: at most its grace
    // after the cut, and the library holder learns it has less than a
    // second left.
    assert!(
        out_of_contact + Duration::from_millis(100) >= in_contact,
        "what was vouched for holds"
    );
    assert!(
        out_of_contact <= cut_at + Duration::from_millis(5050),
        "the vouch moved on after the cut"
    );
    let left = out_of_contact.saturating_duration_since(asked);
    assert!(left < Duration::from_secs(1), "{left:?}");
    eprintln!("the library holder's vouch after the cut: {left:?} left");
}

/// `tx -N Clinical STATEMENT` on `agent`: its `results:` line.
fn tx_results(agent: &Agent, statement: &str) -> String {
    let mut cmd = agent.cli();
    cmd.args(["tx", "-N", "Clinical", statement]);
    let done = run(cmd, Duration::from_secs(20));
    assert_eq!(done.code(), 0, "{done:?}");
    done.stdout
        .lines()
        .find_map(|l| l.strip_prefix("results: "))
        .unwrap_or_else(|| panic!("no results: {done:?}"))
        .to_owned()
}

#[test]
fn a_commands_variables_are_seen_from_every_agent_while_it_runs_and_not_after() {
    let agents = cluster();
    let dir = TempDir::new("clustertx");
    let (running_mark, go) = (dir.path("running"), dir.path("go"));
    let script = format!(
        "touch '{}'; i=0; while [ ! -e '{}' ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done",
        running_mark.display(),
        go.display()
    );
    let entry = "MDS-Entry/CGROVE-35/R-45899";
    let mut cmd = agents[0].cli();
    cmd.args(["tx", "-N", "Clinical", "-d", "3"])
        .arg(format!("assert set {entry} dup"))
        .arg("--")
        .args(sh(&script));
    let running = Running::spawn(cmd);
    wait_for_file(&running_mark, Duration::from_secs(20));
    // Past the first 3 s: renewed meanwhile, and seen from the other agents.
    std::thread::sleep(Duration::from_secs(4));
    for agent in &agents[1..] {
        assert_eq!(tx_results(agent, &format!("exists {entry}")), "1");
    }
    std::fs::write(&go, b"").expect("go");
    let done = running.wait(Duration::from_secs(20));
    assert_eq!(done.code(), 0, "{done:?}");
    assert!(done.stderr.is_empty(), "{done:?}");
    let ended = now();
    while tx_results(&agents[2], &format!("exists {entry}")) != "0" {
        assert!(
            ended.elapsed() < Duration::from_secs(5),
            "the entry outlives its command"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn on_lost_contact_a_commands_variables_are_lost_and_it_is_stopped() {
    let agents = cluster();
    let dir = TempDir::new("clustertxcut");
    let (ready, termed) = (dir.path("ready"), dir.path("termed"));
    let script = format!(
        "trap 'touch \"{}\"; exit 0' TERM; touch '{}'; \
         i=0; while [ $i -lt 2000 ]; do sleep 0.01; i=$((i+1)); done",
        termed.display(),
        ready.display()
    );
    let mut cmd = agents[0].cli();
    cmd.args([
        "tx",
        "-N",
        "Clinical",
        "-d",
        "60",
        "assert set Month-End/CGROVE-35",
    ])
    .arg("--")
    .args(sh(&script));
    let running = Running::spawn(cmd);
    wait_for_file(&ready, Duration::from_secs(20));
    std::thread::sleep(Duration::from_millis(1500));
    let cut = now();
    agents[1].signal(Signal::SIGSTOP);
    agents[2].signal(Signal::SIGSTOP);
    let done = running.wait(Duration::from_secs(20));
    agents[1].signal(Signal::SIGCONT);
    agents[2].signal(Signal::SIGCONT);
    eprintln!("contact cut to exit: {:?}; {}", cut.elapsed(), done.stderr);
    assert_eq!(done.code(), 75, "{done:?}");
    assert!(termed.exists(), "the command got SIGTERM: {done:?}");
    assert!(
        done.stderr.contains("variables of namespace Clinical lost"),
        "{done:?}"
    );
    // Within what the agent vouched for: its grace (5 s) after the cut,
    // though the variables' own duration is a minute.
    assert!(cut.elapsed() < Duration::from_secs(5), "{done:?}");
}
