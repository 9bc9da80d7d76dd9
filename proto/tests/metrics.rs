//! `METRICS` from a core driven with chosen times: waits and holds are
//! measured on the `now` the core is given, refusals and revocations are
//! counted from what the clients are told, and the per-name series stay
//! within their bound however many names are locked.

use std::time::Duration;

use snaplock_proto::metrics::MetricsConfig;
use snaplock_proto::wire::parse;
use snaplock_proto::{ClientId, Config, Core, Credentials, Input, Now, Output, Time, UnixTime};

fn at(secs: f64) -> Now {
    let t = Duration::from_secs_f64(secs);
    Now {
        mono: Time::ZERO + t,
        wall: UnixTime(1_700_000_000_000_000 + t.as_micros() as u64),
    }
}

struct Driver {
    core: Core,
}

impl Driver {
    fn new(config: Config) -> Driver {
        let mut core = Core::new(config, at(0.0));
        for c in 1..=2 {
            let open = Input::ClientOpened {
                client: ClientId(c),
                cred: Credentials::default(),
            };
            core.handle_input(at(0.0), open).unwrap();
        }
        Driver { core }
    }

    /// Sends `line` from `client` at `secs`; returns the replies' commands.
    fn send(&mut self, secs: f64, client: u64, line: &str) -> Vec<String> {
        let msg = parse(line.as_bytes()).unwrap();
        let client = ClientId(client);
        let input = Input::ClientMessage { client, msg };
        self.core.handle_input(at(secs), input).unwrap();
        let mut replies = Vec::new();
        while let Some(out) = self.core.poll_output() {
            if let Output::Reply { reply, .. } = out {
                replies.push(reply.command().to_string());
            }
        }
        replies
    }

    /// The sample lines of the exposition (no comments).
    fn samples(&mut self, secs: f64) -> Vec<String> {
        let text = self.core.metrics_text(at(secs));
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .map(str::to_owned)
            .collect()
    }
}

fn has(samples: &[String], line: &str) {
    assert!(
        samples.iter().any(|s| s == line),
        "no {line:?} in:\n{}",
        samples.join("\n")
    );
}

#[test]
fn a_wait_and_a_hold_are_measured_on_the_times_the_core_was_given() {
    let mut d = Driver::new(Config::default());
    assert_eq!(d.send(1.0, 1, "LOCK object_name=a"), ["LOCKED"]);
    let wait = "LOCK object_name=a;timeout=1700000060";
    assert!(d.send(1.0, 2, wait).is_empty(), "the second waits");
    assert_eq!(
        d.send(3.0, 1, "UNLOCK object_name=a"),
        ["LOCKED", "UNLOCKED"]
    );
    let s = d.samples(3.0);
    has(&s, "snaplock_grants_total 2");
    // The first was granted at once, the second after 2 s.
    has(&s, "snaplock_lock_wait_seconds_bucket{le=\"0.001\"} 1");
    has(&s, "snaplock_lock_wait_seconds_bucket{le=\"1\"} 1");
    has(&s, "snaplock_lock_wait_seconds_bucket{le=\"5\"} 2");
    has(&s, "snaplock_lock_wait_seconds_sum 2");
    // Held from 1 s to 3 s.
    has(&s, "snaplock_lock_hold_seconds_bucket{le=\"1\"} 0");
    has(&s, "snaplock_lock_hold_seconds_bucket{le=\"10\"} 1");
    has(&s, "snaplock_lock_hold_seconds_count 1");
    has(&s, "snaplock_held_locks 1");
    has(&s, "snaplock_waiting_requests 0");
}

#[test]
fn refusals_are_counted_by_error_and_a_stop_counts_its_revocations() {
    let mut d = Driver::new(Config::default());
    assert_eq!(d.send(1.0, 1, "LOCK object_name=a"), ["LOCKED"]);
    assert_eq!(
        d.send(1.0, 2, "LOCK object_name=a;try=true"),
        ["LOCKFAILED"]
    );
    assert_eq!(
        d.send(1.0, 2, "LOCK object_name=a;try=true"),
        ["LOCKFAILED"]
    );
    assert_eq!(d.send(1.0, 2, "LOCK object_name="), ["LOCKFAILED"]);
    let s = d.samples(1.0);
    has(&s, "snaplock_refusals_total{error=\"busy\"} 2");
    has(&s, "snaplock_refusals_total{error=\"invalid\"} 1");
    has(&s, "snaplock_refusals_total{error=\"timedout\"} 0");
    has(&s, "snaplock_revocations_total 0");
    d.core.shutdown(at(2.0));
    let s = d.samples(2.0);
    has(&s, "snaplock_revocations_total 1");
    has(&s, "snaplock_lock_hold_seconds_count 1");
    has(&s, "snaplock_held_locks 0");
}

#[test]
fn however_many_names_are_locked_only_the_busiest_get_a_series() {
    let config = Config {
        metrics: MetricsConfig {
            top_names: 3,
            prefixes: vec![b"hot/".to_vec()],
        },
        ..Config::default()
    };
    let mut d = Driver::new(config);
    for i in 0..2000 {
        let name = if i % 2 == 0 {
            format!("hot/{}", i % 3)
        } else {
            format!("cold/{i}")
        };
        assert_eq!(
            d.send(1.0, 1, &format!("LOCK object_name={name}")),
            ["LOCKED"]
        );
        assert_eq!(
            d.send(1.0, 1, &format!("UNLOCK object_name={name}")),
            ["UNLOCKED"]
        );
    }
    let s = d.samples(1.0);
    let objects: Vec<&String> = (s.iter())
        .filter(|l| l.starts_with("snaplock_object_grants_total{"))
        .collect();
    assert_eq!(objects.len(), 3, "{objects:?}");
    for o in &objects {
        assert!(o.contains("object=\"hot/"), "{objects:?}");
    }
    has(&s, "snaplock_prefix_grants_total{prefix=\"hot/\"} 1000");
    has(&s, "snaplock_grants_total 2000");
}

#[test]
fn long_names_give_fewer_series_rather_than_a_reply_past_the_bound() {
    let config = Config {
        metrics: MetricsConfig {
            top_names: 100,
            prefixes: Vec::new(),
        },
        max_list_bytes: 64 << 10,
        ..Config::default()
    };
    let mut d = Driver::new(config);
    for i in 0..100 {
        let name = format!("{i:03}{}", "n".repeat(4000));
        for _ in 0..=i % 3 {
            let lock = format!("LOCK object_name={name}");
            assert_eq!(d.send(1.0, 1, &lock), ["LOCKED"]);
            assert_eq!(
                d.send(1.0, 1, &format!("UNLOCK object_name={name}")),
                ["UNLOCKED"]
            );
        }
    }
    let text = d.core.metrics_text(at(1.0));
    assert!(text.len() < (64 << 10) + 8192, "{} bytes", text.len());
    let series: Vec<&str> = (text.lines())
        .filter(|l| l.starts_with("snaplock_object_grants_total{"))
        .collect();
    assert!(!series.is_empty() && series.len() < 100, "{}", series.len());
    // The busiest (3 grants) come first: none with fewer is kept before them.
    assert!(
        series.iter().take(5).all(|l| l.ends_with(" 3")),
        "{series:?}"
    );
}

#[test]
fn a_detached_lock_taken_back_counts_as_revoked_and_a_cgroups_end_does_not() {
    let mut core = Core::new(Config::default(), at(0.0));
    let cred = Credentials {
        pid: Some(4001),
        uid: Some(1000),
        gid: Some(1000),
        cgroup: Some(77),
    };
    for client in [ClientId(1), ClientId(2)] {
        core.handle_input(at(0.0), Input::ClientOpened { client, cred })
            .unwrap();
    }
    let lock = |core: &mut Core, client: u64, line: &str| {
        let msg = parse(line.as_bytes()).unwrap();
        let input = Input::ClientMessage {
            client: ClientId(client),
            msg,
        };
        core.handle_input(at(1.0), input).unwrap();
        while core.poll_output().is_some() {}
    };
    lock(&mut core, 1, "LOCK object_name=d;detach=true");
    lock(&mut core, 2, "LOCK object_name=u;owner=cgroup");
    core.handle_input(
        at(1.0),
        Input::ClientClosed {
            client: ClientId(1),
        },
    )
    .unwrap();
    // Client 2 is still open: its lock ends with its cgroup, told lost.
    core.handle_input(at(2.0), Input::UnitEmpty { unit: 77 })
        .unwrap();
    while core.poll_output().is_some() {}
    let text = core.metrics_text(at(2.0));
    assert!(text.contains("\nsnaplock_revocations_total 0\n"), "{text}");
    assert!(text.contains("\nsnaplock_held_locks 1\n"), "{text}");
    core.shutdown(at(3.0));
    while core.poll_output().is_some() {}
    let text = core.metrics_text(at(3.0));
    assert!(
        text.contains("\nsnaplock_revocations_total 1\n"),
        "the detached lock, its holder gone: {text}"
    );
}

#[test]
fn long_prefixes_stop_at_the_size_cap_as_the_busiest_names_do() {
    // 64 prefixes of 256 bytes, each needing escapes: some 100 KiB of
    // series, past a 16 KiB cap (a quarter of the smallest unsent bound).
    let prefixes: Vec<Vec<u8>> = (0..64)
        .map(|i| format!("{i:02}{}", "\"\\".repeat(127)).into_bytes())
        .collect();
    let config = Config {
        metrics: MetricsConfig {
            top_names: 0,
            prefixes,
        },
        max_list_bytes: 16 << 10,
        ..Config::default()
    };
    let d = Driver::new(config);
    let text = d.core.metrics_text(at(1.0));
    assert!(text.len() < (16 << 10) + 8192, "{} bytes", text.len());
    let series = (text.lines())
        .filter(|l| l.starts_with("snaplock_prefix_grants_total{"))
        .count();
    assert!(series > 0 && series < 64, "{series} prefix series");
    // Every family is still declared, so a scraper sees them all.
    for family in [
        "snaplock_prefix_grants_total",
        "snaplock_prefix_held_locks",
        "snaplock_prefix_waiting_requests",
    ] {
        assert!(text.contains(&format!("# TYPE {family} ")), "{family}");
    }
}
