//! The handshake: proofs of the secret, refusals, bad lines.

use super::*;

#[test]
fn two_agents_with_a_shared_secret_link_up_and_grant_locks() {
    let dir = TempDir::new("pair");
    let secret = write_secret(&dir);
    let members = loopback_addrs(2);
    let a = snaplock_agent::spawn(agent_config(
        &dir,
        "alpha",
        members[0],
        &members,
        Some(&secret),
    ))
    .unwrap();
    let b = snaplock_agent::spawn(agent_config(
        &dir,
        "beta",
        members[1],
        &members,
        Some(&secret),
    ))
    .unwrap();
    wait_ready(a.socket(), 2);
    wait_ready(b.socket(), 2);
    assert_eq!(info(a.socket()).get_str("cluster_size"), Some("2"));
    assert_serves_locks(a.socket(), "pair_a");
    assert_serves_locks(b.socket(), "pair_b");
    a.stop().unwrap();
    b.stop().unwrap();
}

#[test]
fn only_a_dialer_that_proves_the_secret_links_up() {
    let trio = Trio::start("secret");
    let (socket, addr) = trio.alpha();
    let mut raw = Raw::connect(addr);
    let accept = raw.connect_as("snaplock", "xray", trio.x, CH);
    assert_eq!(accept.command, "ACCEPT", "{accept}");
    assert_eq!(accept.get_str("name"), Some("alpha"));
    assert_eq!(accept.get_str("listen"), Some(addr.to_string().as_str()));
    // The acceptor proves it knows the secret, as the handshake documents.
    assert_eq!(
        accept.get_str("proof"),
        Some(hmac_hex(SECRET, &format!("accept\n{CH}\nalpha\nxray")).as_str())
    );
    let their = accept.get_str("challenge").unwrap().to_owned();
    assert_eq!(their.len(), 32);
    let wrong = hmac_hex("not the secret", &format!("connect\n{their}\nxray\nalpha"));
    raw.send(&format!("PROOF proof={wrong}"));
    let refuse = raw.message();
    assert_eq!(refuse.command, "REFUSE", "{refuse}");
    assert!(
        refuse
            .get_str("reason")
            .unwrap()
            .contains("authentication failed"),
        "{refuse}"
    );
    assert_eq!(raw.expect_closed(), Vec::<String>::new());

    let mut raw = Raw::connect(addr);
    let accept = raw.connect_as("snaplock", "xray", trio.x, CH);
    assert_eq!(accept.command, "ACCEPT", "{accept}");
    let their = accept.get_str("challenge").unwrap().to_owned();
    let proof = hmac_hex(SECRET, &format!("connect\n{their}\nxray\nalpha"));
    raw.send(&format!("PROOF proof={proof}"));
    // The core was told the link is up: it introduces itself.
    let started = raw.message();
    assert_eq!(started.command, "LOCKSTARTED", "{started}");
    drop(raw);
    assert_serves_locks(socket, "after_secrets");
    wait_ready(socket, 3);
}

#[test]
fn connects_of_another_cluster_version_member_or_taken_name_are_refused() {
    let trio = Trio::start("refusals");
    let (socket, addr) = trio.alpha();
    let stranger = loopback_addrs(1)[0];
    // A connection that says nothing is closed after the handshake timeout.
    let quiet_since = now();
    let mut quiet = Raw::connect(addr);
    for (line, wanted) in [
        (
            format!(
                "CONNECT challenge={CH};cluster=other;listen={};name=xray;version=1",
                trio.x
            ),
            "cluster \"other\" is not this agent's cluster",
        ),
        (
            format!(
                "CONNECT challenge={CH};cluster=snaplock;listen={};name=xray;version=2",
                trio.x
            ),
            "version \"2\" is not supported",
        ),
        (
            format!(
                "CONNECT challenge={CH};cluster=snaplock;listen={stranger};name=xray;version=1"
            ),
            "is not a member of this cluster",
        ),
        (
            format!(
                "CONNECT challenge={CH};cluster=snaplock;listen={};name=beta;version=1",
                trio.x
            ),
            "server name beta is already connected",
        ),
        (
            format!(
                "CONNECT challenge={CH};cluster=snaplock;listen={};name=alpha;version=1",
                trio.x
            ),
            "server name alpha is this agent's own",
        ),
        (
            format!(
                "CONNECT challenge=12;cluster=snaplock;listen={};name=xray;version=1",
                trio.x
            ),
            "challenge must be 32 hexadecimal digits",
        ),
        (
            "LOCK object_name=x".to_owned(),
            "expected CONNECT, got LOCK",
        ),
        ("CONNECT".to_owned(), "CONNECT without version"),
    ] {
        let mut raw = Raw::connect(addr);
        raw.send(&line);
        let refuse = raw.message();
        assert_eq!(refuse.command, "REFUSE", "{line}: {refuse}");
        let reason = refuse.get_str("reason").unwrap();
        assert!(reason.contains(wanted), "{line}: {reason}");
        assert_eq!(raw.expect_closed(), Vec::<String>::new(), "{line}");
    }
    assert_eq!(quiet.expect_closed(), Vec::<String>::new());
    let waited = quiet_since.elapsed();
    assert!(
        waited >= Duration::from_millis(4500) && waited < Duration::from_secs(8),
        "the silent connection was closed after {waited:?}"
    );
    assert_serves_locks(socket, "after_refusals");
    wait_ready(socket, 3);
}

#[test]
fn garbage_or_an_overlong_line_closes_only_that_link() {
    let trio = Trio::start("garbage");
    let (socket, addr) = trio.alpha();
    // Before the handshake.
    let mut raw = Raw::connect(addr);
    raw.send_bytes(b"\x00\x01 not a line of the grammar\n");
    assert_eq!(raw.expect_closed(), Vec::<String>::new());
    let mut raw = Raw::connect(addr);
    raw.send_bytes(&vec![b'A'; (1 << 20) + 64]);
    assert_eq!(raw.expect_closed(), Vec::<String>::new());
    // After it: the PROOF and the garbage arrive together.
    for garbage in [
        b"lower case is no command\n".to_vec(),
        [
            b"LOCKPING serial=".as_slice(),
            &vec![b'9'; (1 << 20) + 64],
            b"\n",
        ]
        .concat(),
    ] {
        let mut raw = Raw::connect(addr);
        let accept = raw.connect_as("snaplock", "xray", trio.x, CH);
        let their = accept.get_str("challenge").unwrap().to_owned();
        let proof = hmac_hex(SECRET, &format!("connect\n{their}\nxray\nalpha"));
        raw.send_bytes(&[format!("PROOF proof={proof}\n").as_bytes(), &garbage].concat());
        let lines = raw.expect_closed();
        assert!(
            lines.iter().all(|l| l.starts_with("LOCK")),
            "only the core's own lines before the close: {lines:?}"
        );
    }
    assert_serves_locks(socket, "after_garbage");
    wait_ready(socket, 3);
}
