//! The `snaplockd` binary as a process: options, exit codes, signals,
//! sd_notify, the socket file's life.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixDatagram, UnixListener};
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::Signal;

use common::{
    Client, Daemon, TempDir, WAIT, assert_reply, deadline_in, snaplockd, start, wait_bounded,
};

fn run_to_end(args: &[&str]) -> (Option<i32>, String, String) {
    let out = snaplockd()
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("snaplockd runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn sigterm_stops_the_agent_with_exit_0_and_removes_the_socket() {
    let dir = TempDir::new("term");
    let daemon = Daemon::start(&dir.socket(), &["-n", "proc_test"], &[]);
    let mut holder = Client::connect(&dir.socket());
    assert_reply(
        &holder.request("INFO"),
        "STATUS",
        &[("server_name", "proc_test")],
    );
    holder.request("LOCK object_name=held");
    daemon.signal(Signal::SIGTERM);
    assert_reply(
        &holder.recv(),
        "UNLOCKED",
        &[("object_name", "held"), ("error", "lost")],
    );
    let (code, stderr) = daemon.wait();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!dir.socket().exists(), "the socket is removed");
    assert!(stderr.contains("stopping (SIGTERM)"), "{stderr}");
}

#[test]
fn sigint_stops_the_agent_too() {
    let dir = TempDir::new("int");
    let daemon = Daemon::start(&dir.socket(), &[], &[]);
    daemon.signal(Signal::SIGINT);
    let (code, stderr) = daemon.wait();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!dir.socket().exists());
}

#[test]
fn sd_notify_gets_ready_then_stopping() {
    let dir = TempDir::new("notify");
    let notify_path = dir.path().join("notify");
    let notify = UnixDatagram::bind(&notify_path).unwrap();
    notify.set_read_timeout(Some(WAIT)).unwrap();
    let daemon = Daemon::start(
        &dir.socket(),
        &[],
        &[("NOTIFY_SOCKET", notify_path.to_str().unwrap())],
    );
    let mut buf = [0u8; 128];
    let n = notify.recv(&mut buf).expect("READY=1 arrives");
    assert_eq!(&buf[..n], b"READY=1");
    daemon.signal(Signal::SIGTERM);
    let n = notify.recv(&mut buf).expect("STOPPING=1 arrives");
    assert_eq!(&buf[..n], b"STOPPING=1");
    let (code, stderr) = daemon.wait();
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn sighup_reloads_the_log_level_from_the_config_file() {
    let dir = TempDir::new("hup");
    let conf = dir.path().join("snaplock.conf");
    std::fs::write(&conf, "log_level=warn\n").unwrap();
    let daemon = Daemon::start(&dir.socket(), &["-c", conf.to_str().unwrap()], &[]);
    std::fs::write(&conf, "log_level=debug\n").unwrap();
    daemon.signal(Signal::SIGHUP);
    // The reload is logged at its new level; the stop is logged at info,
    // which warn would have hidden.
    std::thread::sleep(Duration::from_millis(300));
    let mut c = Client::connect(&dir.socket());
    assert_reply(&c.request("LOCKSTATUS"), "LOCKREADY", &[]);
    daemon.signal(Signal::SIGTERM);
    let (code, stderr) = daemon.wait();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        !stderr.contains("serving as"),
        "info was hidden at warn: {stderr}"
    );
    assert!(stderr.contains("SIGHUP: log level DEBUG"), "{stderr}");
    assert!(stderr.contains("stopping (SIGTERM)"), "{stderr}");
}

#[test]
fn a_live_agent_on_the_socket_makes_a_second_one_refuse_to_start() {
    let (dir, agent) = start("live", |_| {});
    let (code, _, stderr) = run_to_end(&["--socket", dir.socket().to_str().unwrap()]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("snaplockd: error: another agent is listening on"),
        "{stderr}"
    );
    let in_process = snaplock_agent::spawn(snaplock_agent::AgentConfig::new(dir.socket()));
    assert!(
        matches!(
            in_process,
            Err(snaplock_agent::AgentError::AlreadyRunning(_))
        ),
        "spawn says why it could not start: {in_process:?}"
    );
    let mut c = Client::connect(agent.socket());
    assert_reply(&c.request("LOCKSTATUS"), "LOCKREADY", &[]);
}

#[test]
fn a_stale_socket_nobody_answers_on_is_replaced() {
    let dir = TempDir::new("stale");
    drop(UnixListener::bind(dir.socket()).unwrap());
    assert!(dir.socket().exists(), "a socket file with nobody behind it");
    let daemon = Daemon::start(&dir.socket(), &[], &[]);
    let mut c = Client::connect(&dir.socket());
    assert_reply(&c.request("LOCKSTATUS"), "LOCKREADY", &[]);
    daemon.signal(Signal::SIGTERM);
    assert_eq!(daemon.wait().0, Some(0));
}

#[test]
fn a_socket_path_that_is_not_a_socket_is_left_alone_and_refused() {
    let dir = TempDir::new("notsock");
    std::fs::write(dir.socket(), "precious").unwrap();
    let (code, _, stderr) = run_to_end(&["--socket", dir.socket().to_str().unwrap()]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("exists and is not a socket"), "{stderr}");
    assert_eq!(std::fs::read_to_string(dir.socket()).unwrap(), "precious");
}

#[test]
fn the_socket_gets_the_configured_mode_and_group() {
    let gid = nix::unistd::getgid().as_raw();
    let (dir, agent) = start("mode", |cfg| {
        cfg.socket_mode = 0o600;
        cfg.socket_group = Some(gid);
    });
    let meta = std::fs::metadata(dir.socket()).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(meta.gid(), gid);
    agent.stop().unwrap();
    let (dir, _agent) = start("mode", |_| {});
    let meta = std::fs::metadata(dir.socket()).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o660, "default mode");
}

#[test]
fn check_config_prints_nothing_and_exits_0_for_a_good_configuration() {
    let dir = TempDir::new("check");
    let conf = dir.path().join("snaplock.conf");
    std::fs::write(&conf, "# test\nserver_name=checked\nmax_clients=10\n").unwrap();
    let (code, stdout, stderr) =
        run_to_end(&["--check-config", "-c", conf.to_str().unwrap(), "-p", "3"]);
    assert_eq!((code, stdout.as_str(), stderr.as_str()), (Some(0), "", ""));
    assert!(!dir.socket().exists(), "checking creates no socket");
}

#[test]
fn configuration_errors_exit_2_with_a_message_naming_file_and_line() {
    let dir = TempDir::new("badconf");
    let conf = dir.path().join("snaplock.conf");
    std::fs::write(&conf, "server_name=ok\nmax_line_length=12\n").unwrap();
    let conf = conf.to_str().unwrap();
    for args in [vec!["--check-config", "-c", conf], vec!["-c", conf]] {
        let (code, _, stderr) = run_to_end(&args);
        assert_eq!(code, Some(2), "{stderr}");
        assert_eq!(
            stderr.trim_end(),
            format!(
                "snaplockd: error: {conf}:2: max_line_length=\"12\": must be an integer from 256 to 16777216 bytes"
            )
        );
    }
    std::fs::write(dir.path().join("snaplock.conf"), "bogus_key=1\n").unwrap();
    let (code, _, stderr) = run_to_end(&["--check-config", "-c", conf]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.starts_with(&format!(
            "snaplockd: error: {conf}:1: unknown key \"bogus_key\""
        )),
        "{stderr}"
    );
}

#[test]
fn a_missing_named_config_file_is_exit_2() {
    let (code, _, stderr) = run_to_end(&["-c", "/nonexistent/snaplock.conf", "--check-config"]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.starts_with(
            "snaplockd: error: cannot read the configuration file /nonexistent/snaplock.conf"
        ),
        "{stderr}"
    );
}

/// `snaplockd args...` under `ulimit -v` (1 GiB): a run that reads
/// without bound fails instead of taking the machine's memory.
fn run_bounded(args: &[&str]) -> (Option<i32>, String) {
    let child = std::process::Command::new("sh")
        .args(["-c", "ulimit -v 1048576 && exec \"$@\"", "sh"])
        .arg(env!("CARGO_BIN_EXE_snaplockd"))
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("NOTIFY_SOCKET")
        .env_remove("SNAPLOCK_SOCKET")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sh runs");
    wait_bounded(child)
}

#[test]
fn a_config_that_is_no_regular_file_is_refused_at_once_not_waited_for() {
    let dir = TempDir::new("fifo");
    let fifo = dir.path().join("fifo.conf");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let sock = dir.socket();
    let sock = sock.to_str().unwrap();
    for (path, kind) in [
        (fifo.to_str().unwrap(), "FIFO"),
        ("/dev/zero", "character device"),
        (dir.path().to_str().unwrap(), "directory"),
    ] {
        for check in [true, false] {
            let mut args = vec!["-c", path, "--socket", sock, "-n", "fifo_test"];
            if check {
                args.push("--check-config");
            }
            let started = common::now();
            let (code, stderr) = run_bounded(&args);
            assert_eq!(code, Some(2), "{args:?}: {stderr}");
            assert!(
                stderr.contains(&format!("not a regular file (a {kind})")),
                "{args:?}: {stderr}"
            );
            assert!(started.elapsed() < Duration::from_secs(5), "{args:?}");
            assert!(!dir.socket().exists());
        }
    }
}

#[test]
fn a_huge_config_value_gives_a_short_message_and_signs_are_refused() {
    let dir = TempDir::new("huge");
    let conf = dir.path().join("snaplock.conf");
    std::fs::write(&conf, format!("max_clients={}\n", "9".repeat(900_000))).unwrap();
    let conf = conf.to_str().unwrap();
    let (code, stderr) = run_bounded(&["--check-config", "-c", conf]);
    assert_eq!(code, Some(2), "{}", &stderr[..stderr.len().min(500)]);
    assert!(
        stderr.len() < 400 && stderr.contains("(900000 bytes)"),
        "a message of {} bytes: {}",
        stderr.len(),
        &stderr[..stderr.len().min(500)]
    );
    // Past the file's bound: refused whole, before it is parsed.
    std::fs::write(conf, format!("max_clients={}\n", "9".repeat(10_000_000))).unwrap();
    let (code, stderr) = run_bounded(&["--check-config", "-c", conf]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.len() < 400 && stderr.contains("larger than 1048576 bytes"),
        "a message of {} bytes: {}",
        stderr.len(),
        &stderr[..stderr.len().min(500)]
    );
    std::fs::write(conf, "max_clients=+5\n").unwrap();
    let (code, stderr) = run_bounded(&["--check-config", "-c", conf]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("max_clients=\"+5\""), "{stderr}");
}

#[test]
fn bad_options_exit_2() {
    for (args, wanted) in [
        (vec!["--frobnicate"], "frobnicate"),
        (
            vec!["-p", "16"],
            "--candidate-priority: candidate_priority=\"16\": must be from 1 to 15, or off",
        ),
        (
            vec!["--log-level", "chatty"],
            "--log-level: log_level=\"chatty\"",
        ),
        (
            vec!["--listen", "nowhere"],
            "--listen: listen=\"nowhere\": must be IP:PORT",
        ),
        (
            vec!["-n", "bad-name", "--check-config"],
            "--server-name: server_name=\"bad-name\"",
        ),
    ] {
        let (code, _, stderr) = run_to_end(&args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("snaplockd: error: ") && stderr.contains(wanted),
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn neighbors_on_other_computers_without_a_secret_refuse_to_start() {
    let dir = TempDir::new("neigh");
    let sock = dir.socket();
    let sock = sock.to_str().unwrap();
    let (code, _, stderr) = run_to_end(&[
        "--socket",
        sock,
        "--listen",
        "127.0.0.1:4040",
        "--neighbors",
        "127.0.0.1:4040,192.0.2.1:4040",
    ]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("192.0.2.1:4040") && stderr.contains("needs secret_file="),
        "{stderr}"
    );
    assert!(!dir.socket().exists());
    for neighbors in ["127.0.0.1:4040", "127.0.0.1:4040,127.0.0.1:4041"] {
        let (code, _, stderr) = run_to_end(&[
            "--check-config",
            "--socket",
            sock,
            "--listen",
            "127.0.0.1:4040",
            "--neighbors",
            neighbors,
        ]);
        assert_eq!(code, Some(0), "{neighbors}: {stderr}");
    }
}

#[test]
fn a_start_that_fails_after_the_socket_is_bound_leaves_no_socket_file() {
    let dir = TempDir::new("failstart");
    // The peer port is taken: the agent fails after binding its socket.
    let taken = std::net::TcpListener::bind(common::loopback_addrs(1)[0]).unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let sock = dir.socket();
    let (code, _, stderr) = run_to_end(&[
        "--socket",
        sock.to_str().unwrap(),
        "--state-dir",
        dir.path().to_str().unwrap(),
        "-n",
        "failed_start",
        "--listen",
        &addr,
        "--neighbors",
        &addr,
    ]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("cannot listen for peers on {addr}")),
        "{stderr}"
    );
    assert!(!sock.exists(), "{} was left behind", sock.display());
    // In process too.
    let mut cfg = snaplock_agent::AgentConfig::new(&sock);
    cfg.core.cluster.listen = Some(addr.parse().unwrap());
    cfg.core.cluster.neighbors = vec![addr.parse().unwrap()];
    assert!(snaplock_agent::spawn(cfg).is_err());
    assert!(!sock.exists(), "{} was left behind", sock.display());
}

#[test]
fn a_second_agent_of_the_same_name_and_state_directory_refuses_to_start() {
    let dir = TempDir::new("twin");
    let state = dir.path().join("state");
    let first = Daemon::start(
        &dir.socket(),
        &["-n", "twin", "--state-dir", state.to_str().unwrap()],
        &[],
    );
    let other = dir.path().join("other.sock");
    let (code, _, stderr) = run_to_end(&[
        "--socket",
        other.to_str().unwrap(),
        "--state-dir",
        state.to_str().unwrap(),
        "-n",
        "twin",
    ]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("another running snaplockd named twin keeps its record in"),
        "{stderr}"
    );
    assert!(!other.exists(), "{} was left behind", other.display());
    // The first one was not disturbed, and once it is gone the name is free.
    let mut c = Client::connect(&dir.socket());
    assert_reply(&c.request("LOCK object_name=twin"), "LOCKED", &[]);
    drop(c);
    first.signal(Signal::SIGTERM);
    assert_eq!(first.wait().0, Some(0));
    let again = Daemon::start(
        &other,
        &["-n", "twin", "--state-dir", state.to_str().unwrap()],
        &[],
    );
    again.signal(Signal::SIGTERM);
    assert_eq!(again.wait().0, Some(0));
}

#[test]
fn help_and_version_print_and_exit_0() {
    let (code, stdout, _) = run_to_end(&["--help"]);
    assert_eq!(code, Some(0));
    assert!(
        stdout.contains("Usage: snaplockd") && stdout.contains("--check-config"),
        "{stdout}"
    );
    let (code, stdout, _) = run_to_end(&["-V"]);
    assert_eq!(code, Some(0));
    assert_eq!(
        stdout.trim_end(),
        format!("snaplockd {}", snaplock_proto::VERSION)
    );
}

#[test]
fn the_binary_serves_the_protocol_end_to_end() {
    let dir = TempDir::new("e2e");
    let daemon = Daemon::start(&dir.socket(), &["--log-level", "error"], &[]);
    let mut a = Client::connect(&dir.socket());
    let mut b = Client::connect(&dir.socket());
    let first = a.request("LOCK object_name=e2e");
    b.send(&format!(
        "LOCK object_name=e2e;timeout={}",
        deadline_in(5.0)
    ));
    b.assert_silent_for(Duration::from_millis(100));
    drop(a);
    let second = b.recv();
    assert!(common::fence(&second) > common::fence(&first));
    daemon.signal(Signal::SIGTERM);
    let (code, stderr) = daemon.wait();
    assert_eq!(
        (code, stderr.as_str()),
        (Some(0), ""),
        "nothing logged at error level"
    );
}

#[test]
fn the_socket_environment_variable_is_used_when_no_socket_is_configured() {
    let dir = TempDir::new("envsock");
    let sock = dir.socket();
    let child = snaplockd()
        .env("SNAPLOCK_SOCKET", &sock)
        .args(["-n", "env_test"])
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let start = common::now();
    while std::os::unix::net::UnixStream::connect(&sock).is_err() {
        assert!(start.elapsed() < WAIT, "no agent on $SNAPLOCK_SOCKET");
        std::thread::sleep(Duration::from_millis(10));
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        Signal::SIGTERM,
    )
    .unwrap();
    let (code, stderr) = wait_bounded(child);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!sock.exists());
}

/// User plus system CPU time of a process, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name, which is in parentheses.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

#[test]
fn out_of_file_descriptors_the_agent_pauses_accepting_instead_of_spinning() {
    let dir = TempDir::new("emfile");
    let sock = dir.socket();
    let child = std::process::Command::new("sh")
        .args(["-c", "ulimit -n 64 && exec \"$0\" \"$@\""])
        .arg(env!("CARGO_BIN_EXE_snaplockd"))
        .args(["-n", "emfile", "--socket"])
        .arg(&sock)
        .env_remove("RUST_LOG")
        .env_remove("NOTIFY_SOCKET")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let daemon = Daemon {
        child: Some(child),
        socket: sock.clone(),
    };
    let start_wait = common::now();
    while std::os::unix::net::UnixStream::connect(&sock).is_err() {
        assert!(start_wait.elapsed() < WAIT, "no agent");
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut clients: Vec<Client> = (0..100).map(|_| Client::connect(&sock)).collect();
    std::thread::sleep(Duration::from_millis(200));
    let before = cpu_ticks(pid);
    std::thread::sleep(Duration::from_secs(1));
    let spent = cpu_ticks(pid) - before;
    assert!(
        spent < 30,
        "the agent used {spent} ticks of CPU in 1 s with connections it cannot accept"
    );
    let waiting = clients.split_off(70);
    drop(clients);
    for mut c in waiting {
        assert_reply(&c.request("LOCKSTATUS"), "LOCKREADY", &[]);
    }
    daemon.signal(Signal::SIGTERM);
    let (code, stderr) = daemon.wait();
    assert_eq!(code, Some(0), "{stderr}");
    let pauses = stderr.matches("pausing accepts").count();
    assert!(
        (1..=2).contains(&pauses),
        "logged {pauses} times, rate-limited: {stderr}"
    );
}

#[test]
fn a_client_that_stops_reading_mid_reply_does_not_kill_the_binary() {
    let dir = TempDir::new("epipe");
    let daemon = Daemon::start(&dir.socket(), &[], &[]);
    for _ in 0..5 {
        let mut c = Client::connect(&dir.socket());
        assert_reply(&c.request("LOCKSTATUS"), "LOCKREADY", &[]);
        // The agent's next writes to this client fail with EPIPE, which
        // would be a SIGPIPE for a process that did not block it.
        c.stream.shutdown(std::net::Shutdown::Read).unwrap();
        std::io::Write::write_all(&mut c.stream, "INFO\n".repeat(1000).as_bytes()).unwrap();
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut witness = Client::connect(&dir.socket());
    assert_reply(&witness.request("INFO"), "STATUS", &[("clients", "1")]);
    daemon.signal(Signal::SIGTERM);
    let (code, stderr) = daemon.wait();
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn busy_poll_serves_and_then_lets_the_agent_sleep() {
    let dir = TempDir::new("busypoll");
    let conf = dir.path().join("busy.conf");
    std::fs::write(&conf, "busy_poll=1000\n").unwrap();
    let conf = conf.to_str().unwrap().to_owned();
    let daemon = Daemon::start(&dir.socket(), &["-c", &conf], &[]);
    let pid = daemon.pid().as_raw() as u32;
    let mut c = Client::connect(&dir.socket());
    for i in 0..200 {
        let name = format!("busy{i}");
        assert_reply(
            &c.request(&format!("LOCK object_name={name}")),
            "LOCKED",
            &[],
        );
        assert_reply(
            &c.request(&format!("UNLOCK object_name={name}")),
            "UNLOCKED",
            &[],
        );
    }
    // Polling stops a millisecond after the last request: an idle second
    // costs next to no CPU (a spinning loop would use about 100 ticks).
    std::thread::sleep(Duration::from_millis(100));
    let before = cpu_ticks(pid);
    std::thread::sleep(Duration::from_secs(1));
    let spent = cpu_ticks(pid) - before;
    assert!(
        spent < 10,
        "an idle agent with busy_poll used {spent} ticks in 1 s"
    );
    daemon.signal(Signal::SIGTERM);
    let (code, stderr) = daemon.wait();
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn two_waiters_behind_a_holder_are_told_places_1_and_2_then_1_when_the_first_is_granted() {
    let dir = TempDir::new("progress");
    let daemon = Daemon::start(&dir.socket(), &["-n", "proc_progress"], &[]);
    let mut holder = Client::connect(&dir.socket());
    assert_reply(&holder.request("LOCK object_name=q;tag=0"), "LOCKED", &[]);
    let wait = format!("timeout={}", deadline_in(30.0));
    let mut first = Client::connect(&dir.socket());
    first.send(&format!("LOCK object_name=q;tag=1;progress=true;{wait}"));
    assert_reply(
        &first.recv(),
        "LOCKWAITING",
        &[("object_name", "q"), ("position", "1"), ("tag", "1")],
    );
    let mut second = Client::connect(&dir.socket());
    second.send(&format!("LOCK object_name=q;tag=2;progress=true;{wait}"));
    assert_reply(&second.recv(), "LOCKWAITING", &[("position", "2")]);
    first.assert_silent_for(Duration::from_millis(200));
    holder.request("UNLOCK object_name=q;tag=0");
    assert_reply(&first.recv(), "LOCKED", &[("tag", "1")]);
    let moved = second.recv();
    assert_reply(&moved, "LOCKWAITING", &[("position", "1"), ("tag", "2")]);
    assert_eq!(moved.get("reason"), None, "{moved}");
    first.request("UNLOCK object_name=q;tag=1");
    assert_reply(&second.recv(), "LOCKED", &[("tag", "2")]);
    // A LOCKSTATUS connection is told NOLOCK as the agent stops.
    let mut watcher = Client::connect(&dir.socket());
    assert_reply(&watcher.request("LOCKSTATUS"), "LOCKREADY", &[]);
    daemon.signal(Signal::SIGTERM);
    assert_reply(&watcher.recv(), "NOLOCK", &[]);
    let (code, stderr) = daemon.wait();
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn snaplock_cli_lock_v_says_where_it_waits_on_stderr() {
    let dir = TempDir::new("cliv");
    let daemon = Daemon::start(&dir.socket(), &[], &[]);
    let mut holder = Client::connect(&dir.socket());
    assert_reply(&holder.request("LOCK object_name=db"), "LOCKED", &[]);
    let child = std::process::Command::new(common::cli_binary())
        .arg("--socket")
        .arg(dir.socket())
        .args(["lock", "-v", "-w", "8", "db", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("snaplock-cli runs");
    // Released once the CLI's request is queued (a second LOCK on the
    // name from a third connection shows it: position 2).
    let mut probe = Client::connect(&dir.socket());
    let start = common::now();
    loop {
        probe.send(&format!(
            "LOCK object_name=db;progress=true;timeout={}",
            deadline_in(8.0)
        ));
        let got = probe.recv();
        assert_reply(&got, "LOCKWAITING", &[]);
        probe.request("UNLOCK object_name=db");
        if got.get_str("position") == Some("2") {
            break;
        }
        assert!(start.elapsed() < WAIT, "the CLI's request never queued");
        std::thread::sleep(Duration::from_millis(20));
    }
    holder.request("UNLOCK object_name=db");
    let (code, stderr) = wait_bounded(child);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("snaplock-cli: lock \"db\": waiting, position 1 (1 is next)"),
        "{stderr}"
    );
    drop(daemon);
}
