//! Floods of connections and squatted ports.

use super::*;

#[test]
fn a_flood_of_half_open_garbage_and_refused_connections_leaves_the_log_small() {
    let dir = TempDir::new("flood");
    let members = loopback_addrs(2);
    let (agent, socket) = Logged::member(&dir, "alpha", members[0], &members, "info");
    let begin = now();
    while !socket.exists() || TcpStream::connect(members[0]).is_err() {
        assert!(begin.elapsed() < WAIT, "the agent did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(200));
    let before = agent.log().lines().count();
    // Half-open connections that fill the handshake slots and wait out
    // their timeout, lines of garbage, handshakes of another cluster, and
    // connections closed at once: each used to log a line.
    let mut half_open = Vec::new();
    let flood_start = now();
    let mut made = 0;
    while made < 1500 && flood_start.elapsed() < Duration::from_secs(3) {
        made += 1;
        // Bounded: a full accept queue makes a connect wait for retries.
        let Ok(stream) = TcpStream::connect_timeout(&members[0], Duration::from_millis(500)) else {
            continue;
        };
        // Closed with a reset: the flood leaves no TIME_WAIT behind.
        socket2::SockRef::from(&stream)
            .set_linger(Some(Duration::ZERO))
            .unwrap();
        let mut raw = Raw::from(stream);
        match made % 4 {
            0 if half_open.len() < 100 => half_open.push(raw),
            1 => raw.send_bytes(b"\x00\x01 garbage\n"),
            2 => raw.send(&format!(
                "CONNECT challenge={CH};cluster=other;listen={};name=xray;version=1",
                members[1]
            )),
            _ => {}
        }
    }
    // The half-open ones time out after 5 s.
    while flood_start.elapsed() < Duration::from_millis(5800) {
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(half_open);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        info(&socket).command,
        "STATUS",
        "the agent serves its clients"
    );
    let log = agent.log();
    let flood_lines = log.lines().count() - before;
    eprintln!(
        "{made} connections in {:?}: {flood_lines} log lines, {} bytes in all",
        flood_start.elapsed(),
        log.len()
    );
    assert!(
        log.contains("peer connection from") || log.contains("refused"),
        "the flood was seen:\n{log}"
    );
    assert!(
        flood_lines <= 12,
        "{flood_lines} lines for {made} connections; the first ones:\n{}",
        log.lines().take(40).collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn a_connection_on_127_0_0_1_with_the_agents_port_does_not_keep_it_from_listening() {
    // The race the tests' addresses avoid: between finding a port free and
    // the agent's bind, a connection of the machine may be given that port
    // as its ephemeral one, on 127.0.0.1. On an address of its own, the
    // agent binds all the same.
    let dir = TempDir::new("squat");
    let members = loopback_addrs(2);
    let port = members[0].port();
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let squatter =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    let taken: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    // Bound as the kernel binds a connection's ephemeral port (another
    // socket of the machine may hold it already: that is the race too).
    let _connection = squatter.bind(&taken.into()).ok().map(|()| {
        squatter
            .connect(&server.local_addr().unwrap().into())
            .unwrap();
        squatter
    });
    let agent = snaplock_agent::spawn(agent_config(&dir, "alpha", members[0], &members, None))
        .expect("the agent listens on its own address");
    assert_eq!(info(agent.socket()).command, "STATUS");
    agent.stop().unwrap();
}
