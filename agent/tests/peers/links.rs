//! One link per pair of members: closes, simultaneous dials, redials.

use super::*;

#[test]
fn a_member_that_says_a_last_line_and_closes_is_let_go_at_once() {
    // The last bytes and the close arrive together: the agent reads the
    // bytes, and must not stop there (the socket looks empty after a short
    // read, but the close was reported with the bytes and is not reported
    // again).
    let trio = Trio::start("lastline");
    let (socket, addr) = trio.alpha();
    for round in 0..20 {
        // The previous round's xray may still be closing: its name is
        // taken until then (REFUSE), so try again, bounded.
        let start = now();
        let (mut raw, accept) = loop {
            let mut raw = Raw::connect(addr);
            let accept = raw.connect_as("snaplock", "xray", trio.x, CH);
            if accept.get_str("challenge").is_some() {
                break (raw, accept);
            }
            assert!(start.elapsed() < WAIT, "round {round}: {accept}");
            std::thread::sleep(Duration::from_millis(20));
        };
        let their = accept.get_str("challenge").unwrap().to_owned();
        let proof = hmac_hex(SECRET, &format!("connect\n{their}\nxray\nalpha"));
        raw.send(&format!("PROOF proof={proof}"));
        expect_core_hello(&mut raw);
        raw.send(&format!(
            "LOCKSTARTED lockid=99|{:010}|{}|1|xray;server_name=xray;starttime=1;wall=1;epoch=0",
            round, trio.x
        ));
        let start = now();
        while connected(socket) != "4" {
            assert!(start.elapsed() < WAIT, "round {round}: xray never counted");
            std::thread::sleep(Duration::from_millis(5));
        }
        // Empty lines (skipped, never answered) for several reads, the last
        // one short, then the close.
        raw.send_bytes(&vec![b'\n'; 300_000]);
        raw.stream.shutdown(std::net::Shutdown::Write).unwrap();
        // Well within the 2 s a silent link is given (peer_timeout).
        let start = now();
        while connected(socket) != "3" {
            assert!(
                start.elapsed() < Duration::from_millis(1000),
                "round {round}: the closed link is still counted"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    assert_serves_locks(socket, "after_last_lines");
}

#[test]
fn when_both_dial_at_once_the_link_dialed_by_the_smaller_address_is_kept() {
    for agent_smaller in [true, false] {
        let duo = Duo::start("both", agent_smaller);
        let (mut dialed, connect) = duo.next_dial();
        // The fake member dials the agent too, while the agent's own dial
        // waits for its ACCEPT.
        let mut dialing = Raw::connect(duo.a);
        let answer = dialing.connect_as("snaplock", "papa", duo.p, CH);
        if agent_smaller {
            assert_eq!(answer.command, "REFUSE", "{answer}");
            assert!(
                answer
                    .get_str("reason")
                    .unwrap()
                    .starts_with("duplicate link"),
                "{answer}"
            );
            dialing.expect_closed();
            duo.accept_dial(&mut dialed, &connect);
            expect_core_hello(&mut dialed);
        } else {
            assert_eq!(answer.command, "ACCEPT", "{answer}");
            assert_eq!(
                dialed.expect_closed(),
                Vec::<String>::new(),
                "the agent drops its own dial"
            );
            let their = answer.get_str("challenge").unwrap();
            let proof = hmac_hex("", &format!("connect\n{their}\npapa\nalpha"));
            dialing.send(&format!("PROOF proof={proof}"));
            expect_core_hello(&mut dialing);
        }
        duo.agent.stop().unwrap();
    }
}

#[test]
fn a_dialed_member_with_a_wrong_proof_is_dropped_without_a_proof() {
    let duo = Duo::start("wrongaccept", true);
    let (mut raw, _) = duo.next_dial();
    let forged = hmac_hex("guess", &format!("accept\n{CH}\npapa\nalpha"));
    raw.send(&format!(
        "ACCEPT challenge={CH};listen={};name=papa;proof={forged}",
        duo.p
    ));
    assert_eq!(raw.expect_closed(), Vec::<String>::new());
    // It dials again (and is still willing to link up).
    let (mut raw, connect) = duo.next_dial();
    duo.accept_dial(&mut raw, &connect);
    expect_core_hello(&mut raw);
}

#[test]
fn a_member_that_vanishes_is_redialed_at_once_then_with_growing_backoff() {
    let duo = Duo::start("redial", true);
    let (mut raw, connect) = duo.next_dial();
    duo.accept_dial(&mut raw, &connect);
    expect_core_hello(&mut raw);
    let vanished = now();
    drop(raw);
    let (_, _) = duo.next_dial();
    let first = vanished.elapsed();
    assert!(
        first < Duration::from_millis(500),
        "a link that was up is redialed at once, not after {first:?}"
    );
    // Every later attempt fails at once (accepted, then closed unanswered).
    let mut times = vec![now()];
    for _ in 0..6 {
        let (stream, _) = duo.listener.accept().unwrap();
        times.push(now());
        drop(stream);
    }
    let gaps: Vec<Duration> = times.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(gaps[0] < Duration::from_millis(400), "{gaps:?}");
    assert!(
        gaps[4] > Duration::from_millis(300) && gaps[4] > gaps[0] * 2,
        "backoff grows: {gaps:?}"
    );
    assert!(
        gaps.iter().all(|g| *g < Duration::from_millis(2600)),
        "backoff stops at 2 s: {gaps:?}"
    );
}

#[test]
fn two_agents_started_together_keep_exactly_one_link() {
    let dir = TempDir::new("together");
    let members = loopback_addrs(2);
    let (a, a_socket) = Logged::member(&dir, "alpha", members[0], &members, "debug");
    let (b, b_socket) = Logged::member(&dir, "beta", members[1], &members, "debug");
    let begin = now();
    while !(a_socket.exists() && b_socket.exists()) {
        assert!(begin.elapsed() < WAIT, "the agents did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    wait_ready(&a_socket, 2);
    wait_ready(&b_socket, 2);
    // Long enough for a second link, or a flapping one, to show.
    std::thread::sleep(Duration::from_millis(1500));
    wait_ready(&a_socket, 2);
    for (name, node) in [("alpha", &a), ("beta", &b)] {
        let log = node.log();
        assert_eq!(log.matches("): link up (").count(), 1, "{name}:\n{log}");
        assert!(!log.contains("is down"), "{name}:\n{log}");
        assert!(
            log.contains("the cluster is unauthenticated"),
            "{name} warns it has no secret:\n{log}"
        );
    }
}
