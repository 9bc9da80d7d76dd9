//! Real agents tell the truth about what they can grant: a lock-delay and
//! a first election that waits for a member are `unavailable` (answered
//! at once to `try=true`, exit 69 for `snaplock-cli lock`), never `busy`
//! or ready.

use std::time::Duration;

use nix::sys::signal::Signal;

use crate::common::{Client, now};
use crate::harness::Cluster;

/// At once: far under the default wait of 5 s.
const AT_ONCE: Duration = Duration::from_secs(1);

fn lock_delay(info: &snaplock_proto::wire::Message) -> f64 {
    info.get_str("lock_delay")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

#[test]
fn five_agents_that_lose_two_leaders_say_lock_delay_and_refuse_a_try_at_once() {
    let mut c = Cluster::start("delay5", 5);
    let info = c.info(0);
    let leaders: Vec<usize> = info
        .get_str("leaders")
        .unwrap()
        .split(',')
        .map(|n| n.trim_start_matches("node").parse().unwrap())
        .collect();
    for v in &leaders[..2] {
        c.signal(*v, Signal::SIGKILL);
    }
    for v in &leaders[..2] {
        c.wait_exit(*v);
    }
    let s = (0..5).find(|i| !leaders[..2].contains(i)).unwrap();
    // The links close after `peer_timeout` (2 s), the handover waits as
    // long for the lost reports, then the lock-delay (some 7.5 s) runs.
    let info = c.wait_for(s, Duration::from_secs(15), |m| lock_delay(m) > 2.0);
    assert_eq!(info.get_str("ready"), Some("false"), "{info}");
    let mut client = Client::connect(&c.socket(s));
    assert_eq!(client.request("LOCKSTATUS").command, "NOLOCK");
    let sent = now();
    client.send("LOCK object_name=never-held;try=true");
    let got = client.recv_within(AT_ONCE);
    let took = sent.elapsed();
    assert_eq!(got.command, "LOCKFAILED", "{got}");
    assert_eq!(got.get_str("error"), Some("unavailable"), "{got}");
    let why = got.get_str("description").unwrap();
    assert!(why.starts_with("lock-delay: "), "{got}");
    eprintln!("try during the lock-delay answered in {took:?}: {why}");
    // snaplock-cli: -n and -w 0 answer at once, exit 69 with the reason.
    for args in [
        &["lock", "-n"][..],
        &["lock", "-w", "0"],
        &["lock", "-w", "1"],
    ] {
        let mut argv = args.to_vec();
        argv.extend(["fresh-for-cli", "--", "true"]);
        let sent = now();
        let (code, err) = c.cli_status(s, &argv);
        let took = sent.elapsed();
        assert_eq!(code, Some(69), "{argv:?}: {err}");
        assert!(err.contains("lock-delay"), "{argv:?}: {err}");
        assert!(took < Duration::from_secs(3), "{argv:?} took {took:?}");
    }
    let (code, _) = c.cli_status(s, &["status"]);
    assert_eq!(code, Some(1), "status: not ready");
    // Once the delay ends, the name is granted; the connection asked
    // LOCKSTATUS, so it is told.
    c.wait_ready(s, Duration::from_secs(12));
    let info = c.info(s);
    assert_eq!(lock_delay(&info), 0.0, "{info}");
    assert_eq!(client.recv_within(AT_ONCE).command, "LOCKREADY");
    client.send("LOCK object_name=never-held;try=true");
    let got = client.recv_within(Duration::from_secs(2));
    assert_eq!(got.command, "LOCKED", "{got}");
}

#[test]
fn a_fresh_cluster_of_three_with_two_agents_up_says_whom_it_waits_for() {
    let mut c = Cluster::start_some("wait3", 3, 2);
    let missing = c.addr(2).to_string();
    for i in 0..2 {
        let info = c.wait_for(i, Duration::from_secs(10), |m| {
            m.get_str("connected") == Some("2")
        });
        assert_eq!(info.get_str("ready"), Some("false"), "{info}");
        assert_eq!(
            info.get_str("waiting_for"),
            Some(missing.as_str()),
            "{info}"
        );
        let mut client = Client::connect(&c.socket(i));
        client.send("LOCK object_name=w;try=true");
        let got = client.recv_within(AT_ONCE);
        assert_eq!(got.get_str("error"), Some("unavailable"), "{got}");
        assert!(
            got.get_str("description").unwrap().contains(&missing),
            "{got}"
        );
        let (code, err) = c.cli_status(i, &["lock", "-n", "w", "--", "true"]);
        assert_eq!(code, Some(69), "{err}");
        assert!(err.contains(&missing), "{err}");
    }
    // Said in the log too (once every 10 s at most).
    let start = now();
    while !c.log(0).contains("waiting for") {
        assert!(start.elapsed() < Duration::from_secs(5), "{}", c.logs());
        std::thread::sleep(Duration::from_millis(50));
    }
    // The third comes: the first election happens.
    c.restart(2);
    c.wait_converged(3, Duration::from_secs(30));
    assert_eq!(c.info(0).get_str("waiting_for"), None);
}
