//! Unit tests of the configuration: good files, bad files, precedence.

use super::*;

fn env() -> Environment {
    Environment {
        hostname: Some("Web-01.example.com".to_owned()),
        env_socket: None,
        run_dir_exists: false,
        xdg_runtime_dir: Some("/run/user/1000".into()),
        uid: 1000,
        notify_socket: None,
        ..Environment::default()
    }
}

fn err_of(text: &str) -> String {
    parse_text("/etc/snaplock/snaplock.conf", text)
        .unwrap_err()
        .0
}

#[test]
fn a_complete_file_sets_every_key() {
    let text = "\
# the packaged configuration
server_name = alpha_1

socket=/run/snaplock/x.sock
socket_group=0
socket_mode=0640
listen=127.0.0.1:4040
neighbors=127.0.0.1:4040
candidate_priority=off
max_clients=100
max_tickets_per_object=10
max_tickets=1000
max_line_length=256
max_pending_output=65536
busy_poll=50
log_level=debug
";
    let s = parse_text("f", text).unwrap();
    assert_eq!(s.server_name.as_deref(), Some("alpha_1"));
    assert_eq!(s.socket, Some(PathBuf::from("/run/snaplock/x.sock")));
    assert_eq!(s.socket_group, Some(GroupSpec::Gid(0)));
    assert_eq!(s.socket_mode, Some(0o640));
    assert_eq!(s.listen, Some("127.0.0.1:4040".parse().unwrap()));
    assert_eq!(s.neighbors, Some(vec!["127.0.0.1:4040".parse().unwrap()]));
    assert_eq!(s.candidate_priority, Some(Priority::Off));
    assert_eq!(s.max_clients, Some(100));
    assert_eq!(s.max_tickets_per_object, Some(10));
    assert_eq!(s.max_tickets, Some(1000));
    assert_eq!(s.max_line_length, Some(256));
    assert_eq!(s.max_pending_output, Some(65536));
    assert_eq!(s.busy_poll, Some(50));
    assert_eq!(s.log_level, Some(LevelFilter::Debug));
    let cfg = build(s, Settings::default(), &env(), LogSource::default()).unwrap();
    assert_eq!(cfg.core.server_name, "alpha_1");
    assert_eq!(cfg.core.max_clients, 100);
    assert_eq!(cfg.core.max_tickets_per_object, 10);
    assert_eq!(cfg.core.max_tickets, 1000);
    assert_eq!(cfg.busy_poll, Duration::from_micros(50));
    assert_eq!(cfg.socket_group, Some(0));
    assert_eq!(cfg.core.cluster.candidate_priority, None);
    assert_eq!(
        cfg.core.cluster.listen,
        Some("127.0.0.1:4040".parse().unwrap())
    );
}

#[test]
fn an_empty_file_gives_the_single_computer_defaults() {
    let cfg = build(
        parse_text("f", "\n# nothing\n").unwrap(),
        Settings::default(),
        &env(),
        LogSource::default(),
    )
    .unwrap();
    assert_eq!(cfg.core.server_name, "web_01");
    assert_eq!(cfg.socket, PathBuf::from("/run/user/1000/snaplock.sock"));
    assert!(!cfg.private_socket_dir);
    assert_eq!(cfg.socket_mode, 0o660);
    assert_eq!(cfg.socket_group, None);
    assert_eq!(cfg.core.cluster.candidate_priority, Some(14));
    assert_eq!(cfg.cluster_name, "snaplock");
    assert_eq!(cfg.core.cluster.peer_timeout, Duration::from_secs(2));
    assert_eq!(cfg.core.cluster.grace, Duration::from_secs(5));
    assert_eq!(cfg.core.cluster.drift_ppm, 10_000);
    assert_eq!(cfg.core.max_clients, 16_384);
    assert_eq!(cfg.core.max_tickets_per_object, 1_000);
    assert_eq!(cfg.core.max_tickets, 2_000_000);
    assert_eq!(cfg.max_line_length, 65_536);
    assert_eq!(cfg.max_pending_output, 4 << 20);
    assert_eq!(cfg.log_level, LevelFilter::Info);
    assert!(cfg.core.cluster.neighbors.is_empty() && cfg.core.cluster.listen.is_none());
    assert_eq!(cfg.secret_file, None);
}

#[test]
fn an_unknown_key_is_named_with_file_and_line() {
    let e = err_of("# comment\n\nserver_name=a\nlock_timeout=5\n");
    assert!(
        e.starts_with("/etc/snaplock/snaplock.conf:4: unknown key \"lock_timeout\""),
        "{e}"
    );
}

#[test]
fn a_line_without_equals_is_refused_with_its_line_number() {
    let e = err_of("server_name a\n");
    assert!(
        e.starts_with("/etc/snaplock/snaplock.conf:1: expected name=value"),
        "{e}"
    );
}

#[test]
fn a_bad_value_names_the_key_and_the_allowed_range() {
    for (text, wanted) in [
        (
            "max_line_length=100",
            "max_line_length=\"100\": must be an integer from 256 to 16777216 bytes",
        ),
        ("max_line_length=16777217", "from 256 to 16777216 bytes"),
        (
            "max_clients=0",
            "max_clients=\"0\": must be an integer from 1 to 1000000",
        ),
        (
            "max_clients=lots",
            "max_clients=\"lots\": must be an integer",
        ),
        (
            "max_tickets=-1",
            "max_tickets=\"-1\": must be an integer from 1 to 100000000",
        ),
        (
            "max_tickets_per_object=0",
            "max_tickets_per_object=\"0\": must be an integer from 1",
        ),
        (
            "max_pending_output=10",
            "max_pending_output=\"10\": must be an integer from 65536 to 1073741824 bytes",
        ),
        (
            "busy_poll=1001",
            "busy_poll=\"1001\": must be an integer from 0 to 1000 microseconds",
        ),
        (
            "candidate_priority=0",
            "candidate_priority=\"0\": must be from 1 to 15, or off",
        ),
        (
            "candidate_priority=16",
            "candidate_priority=\"16\": must be from 1 to 15, or off",
        ),
        (
            "socket_mode=0999",
            "socket_mode=\"0999\": must be an octal mode from 0 to 0777",
        ),
        (
            "socket_mode=01777",
            "socket_mode=\"01777\": must be an octal mode",
        ),
        (
            "log_level=loud",
            "log_level=\"loud\": must be error, warn, info, debug or trace",
        ),
        ("listen=localhost", "listen=\"localhost\": must be IP:PORT"),
        (
            "neighbors=127.0.0.1:1,nowhere",
            "\"nowhere\" is not IP:PORT",
        ),
        (
            "server_name=9lives",
            "server_name=\"9lives\": must be 1 to 64 ASCII letters",
        ),
        ("server_name=a-b", "server_name=\"a-b\": must be"),
    ] {
        let e = err_of(&format!("\n{text}\n"));
        assert!(
            e.starts_with("/etc/snaplock/snaplock.conf:2: "),
            "{text}: {e}"
        );
        assert!(e.contains(wanted), "{text}: {e}");
    }
}

#[test]
fn numbers_take_digits_only_as_the_protocol_does() {
    for text in [
        "max_clients=+5",
        "max_tickets=+100",
        "max_tickets_per_object=+1",
        "max_line_length=+1024",
        "max_pending_output=+65536",
        "busy_poll=+1",
        "candidate_priority=+3",
        "socket_mode=+660",
        "peer_timeout=+2",
        "grace=+5.5",
        "clock_drift=+1",
        "grace=5.+5",
        "max_clients=5_000",
        "max_clients=0x10",
    ] {
        let e = err_of(&format!("{text}\n"));
        let key = text.split('=').next().unwrap();
        assert!(e.contains(&format!("{key}=\"")), "{text}: {e}");
    }
    // A numeric group that is no gid is refused, not taken as a name; a
    // signed one is no number, so it can only be a group's name.
    assert!(err_of("socket_group=4294967296\n").contains("gid"));
    assert_eq!(
        parse_text("f", "socket_group=+5\n").unwrap().socket_group,
        Some(GroupSpec::Name("+5".to_owned()))
    );
}

#[test]
fn a_huge_value_is_cut_in_the_message() {
    let huge = "9".repeat(10_000_000);
    for text in [
        format!("max_clients={huge}\n"),
        format!("neighbors=127.0.0.1:1,{huge}\n"),
        format!("{huge}\n"),
        format!("{huge}=1\n"),
    ] {
        let e = err_of(&text);
        assert!(e.len() < 1000, "a message of {} bytes", e.len());
        assert!(e.contains("(10000000 bytes)"), "{e}");
    }
}

#[test]
fn the_configuration_file_must_be_a_regular_file_of_bounded_size() {
    let dir = std::env::temp_dir().join(format!("sla-conf-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let big = dir.join("big.conf");
    let mut text = "# padding\n".repeat((MAX_CONFIG_FILE / 10) as usize + 1);
    text.push_str("max_clients=5\n");
    std::fs::write(&big, &text).unwrap();
    let e = read_file(&big).unwrap_err().0;
    assert!(e.contains("larger than 1048576 bytes"), "{e}");
    let e = read_file(Path::new("/dev/zero")).unwrap_err().0;
    assert!(e.contains("not a regular file"), "{e}");
    let ok = dir.join("ok.conf");
    std::fs::write(&ok, "max_clients=5\n").unwrap();
    assert_eq!(read_file(&ok).unwrap().max_clients, Some(5));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn options_win_over_the_file() {
    let file = parse_text(
        "f",
        "server_name=from_file\nlog_level=warn\nmax_clients=7\nsocket=/a.sock\n",
    )
    .unwrap();
    let mut options = Settings::default();
    options.set("server_name", "from_option").unwrap();
    options.set("socket", "/b.sock").unwrap();
    let cfg = build(file, options, &env(), LogSource::default()).unwrap();
    assert_eq!(cfg.core.server_name, "from_option");
    assert_eq!(cfg.socket, PathBuf::from("/b.sock"));
    assert_eq!(
        cfg.log_level,
        LevelFilter::Warn,
        "what the options leave alone comes from the file"
    );
    assert_eq!(cfg.core.max_clients, 7);
}

#[test]
fn a_later_line_replaces_an_earlier_one() {
    let s = parse_text("f", "log_level=warn\nlog_level=trace\n").unwrap();
    assert_eq!(s.log_level, Some(LevelFilter::Trace));
}

#[test]
fn empty_optional_values_mean_not_set() {
    let s = parse_text(
        "f",
        "listen=\nneighbors=\nsocket_group=\nsecret_file=\nsocket=\n",
    )
    .unwrap();
    assert_eq!(s, Settings::default());
}

#[test]
fn the_default_server_name_is_the_sanitized_host_name() {
    assert_eq!(
        server_name_from_hostname("Web-01.example.com").unwrap(),
        "web_01"
    );
    assert_eq!(server_name_from_hostname("db").unwrap(), "db");
    let e = server_name_from_hostname("01-db.example.com")
        .unwrap_err()
        .0;
    assert!(e.contains("set server_name="), "{e}");
    let e = server_name_from_hostname("caf\u{e9}").unwrap_err().0;
    assert!(e.contains("set server_name="), "{e}");
    let mut env = env();
    env.hostname = Some("1234".to_owned());
    let e = build(
        Settings::default(),
        Settings::default(),
        &env,
        LogSource::default(),
    )
    .unwrap_err()
    .0;
    assert!(e.contains("--server-name"), "{e}");
}

#[test]
fn loopback_neighbors_make_a_cluster_without_a_secret() {
    let mut s = Settings::default();
    s.set(
        "neighbors",
        "127.0.0.1:4040, 127.0.0.2:4040, 127.0.0.1:4041",
    )
    .unwrap();
    s.set("listen", "127.0.0.1:4040").unwrap();
    s.set("candidate_priority", "3").unwrap();
    let cfg = build(s, Settings::default(), &env(), LogSource::default()).unwrap();
    let cluster = &cfg.core.cluster;
    assert_eq!(cluster.listen, Some("127.0.0.1:4040".parse().unwrap()));
    assert_eq!(cluster.members().len(), 3);
    assert!(cluster.is_multi());
    assert_eq!(cluster.candidate_priority, Some(3));
}

#[test]
fn neighbors_on_other_computers_need_a_secret_and_a_listen_address() {
    let mut s = Settings::default();
    s.set("neighbors", "192.0.2.1:4040,192.0.2.2:4040").unwrap();
    s.set("listen", "192.0.2.1:4040").unwrap();
    let e = build(s.clone(), Settings::default(), &env(), LogSource::default())
        .unwrap_err()
        .0;
    assert!(e.contains("needs secret_file="), "{e}");
    assert!(e.contains("192.0.2.2:4040"), "{e}");
    let dir = std::env::temp_dir().join(format!("snaplock-config-secret-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let secret = dir.join("secret");
    std::fs::write(&secret, "s3cret\n").unwrap();
    s.set("secret_file", secret.to_str().unwrap()).unwrap();
    let cfg = build(s.clone(), Settings::default(), &env(), LogSource::default()).unwrap();
    assert_eq!(cfg.secret_file, Some(secret.clone()));
    assert_eq!(cfg.core.cluster.members().len(), 2);
    std::fs::write(&secret, "\n").unwrap();
    let e = build(s, Settings::default(), &env(), LogSource::default())
        .unwrap_err()
        .0;
    assert!(e.starts_with("secret_file=") && e.contains("empty"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
    let mut no_listen = Settings::default();
    no_listen.set("neighbors", "127.0.0.1:4040").unwrap();
    let e = build(no_listen, Settings::default(), &env(), LogSource::default())
        .unwrap_err()
        .0;
    assert!(e.contains("listen= is not set"), "{e}");
}

#[test]
fn cluster_timings_and_name_reach_the_core_configuration() {
    let text = "cluster_name=prod_2\npeer_timeout=0.75\ngrace=10\nclock_drift=0.5\n";
    let s = parse_text("f", text).unwrap();
    assert_eq!(s.peer_timeout, Some(Duration::from_millis(750)));
    let cfg = build(s, Settings::default(), &env(), LogSource::default()).unwrap();
    assert_eq!(cfg.cluster_name, "prod_2");
    assert_eq!(cfg.core.cluster.peer_timeout, Duration::from_millis(750));
    assert_eq!(cfg.core.cluster.grace, Duration::from_secs(10));
    assert_eq!(cfg.core.cluster.drift_ppm, 5_000);
    let mut options = Settings::default();
    options.set("clock_drift", "9.9999").unwrap();
    assert_eq!(options.clock_drift, Some(99_999));
    options.set("clock_drift", "0").unwrap();
    assert_eq!(options.clock_drift, Some(0));
}

#[test]
fn bad_cluster_settings_name_their_key() {
    for (text, wanted) in [
        (
            "cluster_name=9lives",
            "cluster_name=\"9lives\": must be 1 to 64",
        ),
        ("cluster_name=", "cluster_name=\"\": must be"),
        (
            "peer_timeout=0.4",
            "peer_timeout=\"0.4\": must be a number of seconds from 0.5 to 60",
        ),
        ("peer_timeout=1.0001", "peer_timeout=\"1.0001\": must be"),
        ("peer_timeout=2s", "peer_timeout=\"2s\": must be"),
        (
            "grace=0",
            "grace=\"0\": must be a number of seconds from 0.5 to 3600",
        ),
        ("grace=.5", "grace=\".5\": must be"),
        (
            "clock_drift=10",
            "clock_drift=\"10\": must be a percentage from 0 to under 10",
        ),
        ("clock_drift=1.", "clock_drift=\"1.\": must be"),
        ("clock_drift=-1", "clock_drift=\"-1\": must be"),
    ] {
        let e = err_of(&format!("\n{text}\n"));
        assert!(
            e.starts_with("/etc/snaplock/snaplock.conf:2: ") && e.contains(wanted),
            "{text}: {e}"
        );
    }
    let s = parse_text("f", "peer_timeout=3\ngrace=2.5\n").unwrap();
    let e = build(s, Settings::default(), &env(), LogSource::default())
        .unwrap_err()
        .0;
    assert!(
        e.starts_with("grace=2.5 s is shorter than peer_timeout=3 s"),
        "{e}"
    );
}

#[test]
fn the_socket_path_follows_the_shared_rule() {
    let mut env = env();
    env.env_socket = Some("/from/env.sock".into());
    let cfg = build(
        Settings::default(),
        Settings::default(),
        &env,
        LogSource::default(),
    )
    .unwrap();
    assert_eq!(cfg.socket, PathBuf::from("/from/env.sock"));
    env.env_socket = None;
    env.xdg_runtime_dir = None;
    let cfg = build(
        Settings::default(),
        Settings::default(),
        &env,
        LogSource::default(),
    )
    .unwrap();
    assert_eq!(
        cfg.socket,
        PathBuf::from("/tmp/snaplock-1000/snaplock.sock")
    );
    assert!(cfg.private_socket_dir);
    env.run_dir_exists = true;
    let cfg = build(
        Settings::default(),
        Settings::default(),
        &env,
        LogSource::default(),
    )
    .unwrap();
    assert_eq!(cfg.socket, PathBuf::from("/run/snaplock/snaplock.sock"));
}

#[test]
fn a_missing_secret_file_or_group_is_an_error() {
    let mut s = Settings::default();
    s.set("secret_file", "/nonexistent/snaplock/secret")
        .unwrap();
    let e = build(s, Settings::default(), &env(), LogSource::default())
        .unwrap_err()
        .0;
    assert!(
        e.starts_with("secret_file=/nonexistent/snaplock/secret: cannot read it"),
        "{e}"
    );
    let mut s = Settings::default();
    s.set("socket_group", "no_such_group_snaplock").unwrap();
    let e = build(s, Settings::default(), &env(), LogSource::default())
        .unwrap_err()
        .0;
    assert_eq!(e, "socket_group=\"no_such_group_snaplock\": no such group");
}

#[test]
fn socket_modes_read_as_octal() {
    let mut s = Settings::default();
    for (text, mode) in [("0660", 0o660), ("660", 0o660), ("0o600", 0o600), ("0", 0)] {
        s.set("socket_mode", text).unwrap();
        assert_eq!(s.socket_mode, Some(mode), "{text}");
    }
}

#[test]
fn sighup_takes_the_option_then_the_file_then_info() {
    let dir = std::env::temp_dir().join(format!("snaplock-config-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("snaplock.conf");
    std::fs::write(&path, "log_level=trace\n").unwrap();
    let mut source = LogSource {
        option: None,
        file: Some(path.clone()),
        from_env: false,
    };
    assert_eq!(source.reload(), Ok(Some(LevelFilter::Trace)));
    std::fs::write(&path, "server_name=x\n").unwrap();
    assert_eq!(source.reload(), Ok(Some(LevelFilter::Info)));
    std::fs::write(&path, "log_level=nope\n").unwrap();
    assert!(
        source.reload().is_err(),
        "a broken file keeps the level and says why"
    );
    source.option = Some(LevelFilter::Error);
    assert_eq!(source.reload(), Ok(Some(LevelFilter::Error)));
    source.from_env = true;
    assert_eq!(source.reload(), Ok(None));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_metrics_keys_reach_the_agent_and_the_core_within_their_bounds() {
    let text = "metrics_listen=127.0.0.1:9101\nmetrics_top_names=5\n\
                metrics_prefixes=  https://x/a,b  user/\n";
    let s = parse_text("f", text).unwrap();
    let cfg = build(s, Settings::default(), &env(), LogSource::default()).unwrap();
    assert_eq!(cfg.metrics_listen, Some("127.0.0.1:9101".parse().unwrap()));
    assert_eq!(cfg.core.metrics.top_names, 5);
    let prefixes: Vec<&[u8]> = cfg
        .core
        .metrics
        .prefixes
        .iter()
        .map(Vec::as_slice)
        .collect();
    assert_eq!(prefixes, [&b"https://x/a,b"[..], b"user/"]);
    let off = build(
        Settings::default(),
        Settings::default(),
        &env(),
        LogSource::default(),
    )
    .unwrap();
    assert_eq!((off.metrics_listen, off.core.metrics.top_names), (None, 20));
    for (text, wanted) in [
        (
            "metrics_listen=9101",
            "metrics_listen=\"9101\": must be IP:PORT",
        ),
        (
            "metrics_top_names=101",
            "metrics_top_names=\"101\": must be an integer from 0 to 100",
        ),
    ] {
        let e = err_of(&format!("\n{text}\n"));
        assert!(e.contains(wanted), "{text}: {e}");
    }
    let many: Vec<String> = (0..65).map(|i| format!("p{i}/")).collect();
    let e = err_of(&format!("metrics_prefixes={}\n", many.join(" ")));
    assert!(e.contains("at most 64 prefixes"), "{e}");
    let e = err_of(&format!("metrics_prefixes={}\n", "x".repeat(257)));
    assert!(e.contains("at most 256 bytes"), "{e}");
    let s = parse_text("f", "listen=127.0.0.1:4040\nmetrics_listen=0.0.0.0:4040\n").unwrap();
    let e = build(s, Settings::default(), &env(), LogSource::default())
        .unwrap_err()
        .0;
    assert!(
        e.starts_with("metrics_listen=0.0.0.0:4040 takes the port of listen=127.0.0.1:4040"),
        "{e}"
    );
}
