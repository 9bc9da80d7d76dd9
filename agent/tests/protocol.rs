//! Every request of snaplock(7) through a real socket of an in-process
//! agent (of a `snaplockd` process for the trust contract, whose uptime
//! is the process's), and every `LOCKFAILED` error one computer can
//! produce.

mod common;

use std::time::Duration;

use common::{
    Client, Daemon, TempDir, assert_reply, deadline_in, fence, now, param, start, unix_now,
};

#[test]
fn lock_is_answered_locked_with_key_timeout_date_fence_and_tag() {
    let (_dir, agent) = start("locked", |_| {});
    let mut c = Client::connect(agent.socket());
    let before = unix_now();
    let m = c.request("LOCK object_name=https://example.com/user/42#edit;duration=30;pid=42;tag=7");
    assert_reply(
        &m,
        "LOCKED",
        &[
            ("object_name", "https://example.com/user/42#edit"),
            ("key", "localhost/42"),
            ("tag", "7"),
        ],
    );
    let timeout_date: f64 = param(&m, "timeout_date").parse().unwrap();
    assert!(
        (timeout_date - (before + 30.0)).abs() < 2.0,
        "timeout_date {timeout_date} is not now+30 s"
    );
    assert!(fence(&m) > 0);
}

#[test]
fn without_pid_the_key_is_unique_to_the_connection() {
    let (_dir, agent) = start("key", |_| {});
    let mut a = Client::connect(agent.socket());
    let mut b = Client::connect(agent.socket());
    let ka = param(&a.request("LOCK object_name=ka"), "key").to_owned();
    let kb = param(&b.request("LOCK object_name=kb"), "key").to_owned();
    let pid = std::process::id();
    assert!(
        ka.starts_with(&format!("localhost/{pid}.")),
        "{ka}: the peer's pid joined with the connection"
    );
    assert_ne!(ka, kb, "two connections of one process never share a key");
}

#[test]
fn unlock_hands_the_lock_to_the_waiter_at_once() {
    let (_dir, agent) = start("handoff", |_| {});
    let mut a = Client::connect(agent.socket());
    let mut b = Client::connect(agent.socket());
    let first = fence(&a.request("LOCK object_name=x"));
    b.send(&format!("LOCK object_name=x;timeout={}", deadline_in(10.0)));
    b.assert_silent_for(Duration::from_millis(200));
    let t0 = now();
    assert_reply(
        &a.request("UNLOCK object_name=x"),
        "UNLOCKED",
        &[("object_name", "x")],
    );
    let second = fence(&b.recv());
    assert!(
        t0.elapsed() < Duration::from_millis(500),
        "handoff took {:?}",
        t0.elapsed()
    );
    assert!(
        second > first,
        "fences strictly increase: {first} then {second}"
    );
}

#[test]
fn unlock_of_nothing_held_is_answered_unlocked() {
    let (_dir, agent) = start("unlock0", |_| {});
    let mut c = Client::connect(agent.socket());
    assert_reply(
        &c.request("UNLOCK object_name=nothing;tag=3"),
        "UNLOCKED",
        &[("object_name", "nothing"), ("tag", "3")],
    );
}

#[test]
fn extend_moves_the_timeout_date_and_keeps_the_fence() {
    let (_dir, agent) = start("extend", |_| {});
    let mut c = Client::connect(agent.socket());
    let locked = c.request("LOCK object_name=e;duration=10");
    let extended = c.request("EXTEND object_name=e;duration=100");
    assert_eq!(fence(&extended), fence(&locked));
    let t1: f64 = param(&locked, "timeout_date").parse().unwrap();
    let t2: f64 = param(&extended, "timeout_date").parse().unwrap();
    assert!(t2 - t1 > 85.0, "{t1} -> {t2}");
    let m = c.request("EXTEND object_name=not_mine;duration=10");
    assert_reply(&m, "LOCKFAILED", &[("error", "invalid")]);
}

#[test]
fn lockstatus_info_help_and_alive_are_answered() {
    let (_dir, agent) = start("status", |cfg| cfg.core.server_name = "alpha".into());
    let mut c = Client::connect(agent.socket());
    assert_reply(&c.request("LOCKSTATUS"), "LOCKREADY", &[]);
    c.request("LOCK object_name=i");
    let info = c.request("INFO");
    assert_reply(
        &info,
        "STATUS",
        &[
            ("server_name", "alpha"),
            ("version", snaplock_proto::VERSION),
            ("ready", "true"),
            ("leaders", "alpha"),
            ("cluster_size", "1"),
            ("clients", "1"),
            ("objects", "1"),
            ("tickets", "1"),
            ("grants", "1"),
        ],
    );
    let help = c.request("HELP");
    assert_eq!(help.command, "COMMANDS");
    for cmd in [
        "LOCK",
        "UNLOCK",
        "EXTEND",
        "LOCKSTATUS",
        "LISTTICKETS",
        "INFO",
        "HELP",
        "ALIVE",
    ] {
        assert!(
            param(&help, "list").split(',').any(|c| c == cmd),
            "{cmd} in {help}"
        );
    }
    let alive = c.request("ALIVE serial=5;timestamp=1700000000");
    assert_reply(
        &alive,
        "ABSOLUTELY",
        &[("serial", "5"), ("timestamp", "1700000000")],
    );
    let reply_ts: f64 = param(&alive, "reply_timestamp").parse().unwrap();
    assert!((reply_ts - unix_now()).abs() < 5.0);
}

#[test]
fn listtickets_lists_held_and_waiting_tickets() {
    let (_dir, agent) = start("list", |_| {});
    let mut a = Client::connect(agent.socket());
    let mut b = Client::connect(agent.socket());
    a.request("LOCK object_name=listed;pid=11");
    b.send("LOCK object_name=listed;pid=12");
    b.assert_silent_for(Duration::from_millis(100));
    let m = a.request("LISTTICKETS");
    assert_eq!(m.command, "TICKETLIST");
    let list = param(&m, "list");
    assert_eq!(list.lines().count(), 2, "{list}");
    assert!(
        list.contains("localhost/11") && list.contains("localhost/12"),
        "{list}"
    );
    assert!(
        list.contains("fence:"),
        "the held one shows its fence: {list}"
    );
}

#[test]
fn an_unknown_command_is_answered_unknown_and_the_connection_stays_open() {
    let (_dir, agent) = start("unknown", |_| {});
    let mut c = Client::connect(agent.socket());
    assert_reply(
        &c.request("FROBNICATE a=1"),
        "UNKNOWN",
        &[("command", "FROBNICATE")],
    );
    assert_reply(&c.request("LOCKSTATUS"), "LOCKREADY", &[]);
}

#[test]
fn a_malformed_line_is_answered_invalid_and_the_connection_stays_open() {
    let (_dir, agent) = start("invalid", |_| {});
    let mut c = Client::connect(agent.socket());
    let m = c.request("LOCK object_name");
    assert_reply(
        &m,
        "INVALID",
        &[("command", "LOCK"), ("message", "LOCK object_name")],
    );
    assert!(param(&m, "reason").contains("'='"), "{m}");
    assert_reply(&c.request("LOCKSTATUS"), "LOCKREADY", &[]);
}

#[test]
fn unknown_parameters_are_ignored() {
    let (_dir, agent) = start("params", |_| {});
    let mut c = Client::connect(agent.socket());
    let m = c.request("LOCK object_name=p;colour=blue;priority_boost=9");
    assert_reply(&m, "LOCKED", &[("object_name", "p")]);
}

#[test]
fn a_deadline_already_past_fails_with_timedout_at_once() {
    let (_dir, agent) = start("past", |_| {});
    let mut c = Client::connect(agent.socket());
    let m = c.request(&format!("LOCK object_name=t;timeout={}", deadline_in(-1.0)));
    assert_reply(
        &m,
        "LOCKFAILED",
        &[("object_name", "t"), ("error", "timedout")],
    );
}

#[test]
fn a_waiting_lock_fails_with_timedout_at_its_deadline() {
    let (_dir, agent) = start("wait", |_| {});
    let mut a = Client::connect(agent.socket());
    let mut b = Client::connect(agent.socket());
    a.request("LOCK object_name=w");
    let t0 = now();
    b.send(&format!(
        "LOCK object_name=w;timeout={};tag=9",
        deadline_in(0.5)
    ));
    let m = b.recv();
    assert_reply(&m, "LOCKFAILED", &[("error", "timedout"), ("tag", "9")]);
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_millis(400) && waited < Duration::from_secs(2),
        "waited {waited:?}"
    );
}

#[test]
fn bad_parameters_fail_with_invalid() {
    let (_dir, agent) = start("badparams", |_| {});
    let mut c = Client::connect(agent.socket());
    for line in [
        "LOCK duration=5",
        "LOCK object_name=",
        "LOCK object_name=n;duration=0",
        "LOCK object_name=n;duration=604801",
        "LOCK object_name=n;unlock_duration=604801",
        "LOCK object_name=n;duration=-1",
        "LOCK object_name=n;duration=1e3",
        "LOCK object_name=n;pid=0",
        "LOCK object_name=n;pid=99999999999999999999999",
        "LOCK object_name=n;tag=abc",
        "LOCK object_name=n;tag=99999999999999999999",
        "LOCK object_name=n;timeout=99999999999999",
        "LOCK object_name=n;timeout=soon",
        "LOCK object_name=n;mode=readwrite",
        "LOCK object_name=n;mode=shared;limit=0",
        "LOCK object_name=n;limit=3",
        "LOCK object_name=n;policy=eager",
        "LOCK object_name=n;try=maybe",
        "LOCK object_name=n;detach=yes",
        "EXTEND object_name=n",
    ] {
        let m = c.request(line);
        assert_reply(&m, "LOCKFAILED", &[("error", "invalid")]);
        assert!(!param(&m, "description").is_empty(), "{line}: {m}");
    }
    let long_name = "n".repeat(5000);
    let m = c.request(&format!("LOCK object_name={long_name}"));
    assert_reply(&m, "LOCKFAILED", &[("error", "invalid")]);
    assert_reply(
        &c.request("LOCK object_name=n;duration=604800;unlock_duration=0"),
        "LOCKED",
        &[],
    );
}

#[test]
fn a_second_lock_with_the_same_key_fails_with_duplicate() {
    let (_dir, agent) = start("dup", |_| {});
    let mut a = Client::connect(agent.socket());
    let mut b = Client::connect(agent.socket());
    a.request("LOCK object_name=d;pid=500");
    let m = b.request("LOCK object_name=d;pid=500");
    assert_reply(
        &m,
        "LOCKFAILED",
        &[("error", "duplicate"), ("key", "localhost/500")],
    );
}

#[test]
fn try_on_a_held_lock_fails_with_busy() {
    let (_dir, agent) = start("busy", |_| {});
    let mut a = Client::connect(agent.socket());
    let mut b = Client::connect(agent.socket());
    a.request("LOCK object_name=b");
    assert_reply(
        &b.request("LOCK object_name=b;try=true"),
        "LOCKFAILED",
        &[("error", "busy")],
    );
    assert_reply(&b.request("LOCK object_name=free;try=true"), "LOCKED", &[]);
}

#[test]
fn too_many_tickets_fail_with_overflow() {
    let (_dir, agent) = start("overflow", |cfg| {
        cfg.core.max_tickets_per_object = 2;
        cfg.core.max_tickets = 3;
    });
    let mut c = Client::connect(agent.socket());
    c.request("LOCK object_name=o;pid=1");
    c.send("LOCK object_name=o;pid=2");
    let m = c.request("LOCK object_name=o;pid=3");
    assert_reply(
        &m,
        "LOCKFAILED",
        &[("error", "overflow"), ("object_name", "o")],
    );
    assert_reply(&c.request("LOCK object_name=p;pid=4"), "LOCKED", &[]);
    assert_reply(
        &c.request("LOCK object_name=q;pid=5"),
        "LOCKFAILED",
        &[("error", "overflow")],
    );
}

#[test]
fn unlocking_another_connections_lock_fails_with_denied() {
    let (_dir, agent) = start("denied", |_| {});
    let mut owner = Client::connect(agent.socket());
    let mut other = Client::connect(agent.socket());
    let first = fence(&owner.request("LOCK object_name=mine;pid=77"));
    let m = other.request("UNLOCK object_name=mine;pid=77");
    assert_reply(
        &m,
        "LOCKFAILED",
        &[("error", "denied"), ("object_name", "mine")],
    );
    let m = other.request("EXTEND object_name=mine;pid=77;duration=5");
    assert_reply(&m, "LOCKFAILED", &[("error", "denied")]);
    assert_reply(
        &other.request("LOCK object_name=mine;try=true"),
        "LOCKFAILED",
        &[("error", "busy")],
    );
    assert_reply(
        &owner.request("UNLOCK object_name=mine;pid=77"),
        "UNLOCKED",
        &[],
    );
    assert!(fence(&other.request("LOCK object_name=mine")) > first);
}

#[test]
fn stopping_fails_waiters_with_unavailable_and_tells_holders_lost() {
    let (dir, agent) = start("stop", |_| {});
    let mut holder = Client::connect(agent.socket());
    let mut waiter = Client::connect(agent.socket());
    holder.request("LOCK object_name=s;tag=1");
    waiter.send(&format!(
        "LOCK object_name=s;tag=2;timeout={}",
        deadline_in(30.0)
    ));
    waiter.assert_silent_for(Duration::from_millis(100));
    agent.stop().expect("a clean stop");
    assert_reply(
        &holder.recv(),
        "UNLOCKED",
        &[("object_name", "s"), ("error", "lost"), ("tag", "1")],
    );
    assert_reply(
        &waiter.recv(),
        "LOCKFAILED",
        &[("object_name", "s"), ("error", "unavailable"), ("tag", "2")],
    );
    assert!(holder.expect_eof().is_empty());
    assert!(waiter.expect_eof().is_empty());
    assert!(!dir.socket().exists(), "the socket is removed");
}

#[test]
fn tags_let_one_connection_have_many_requests_in_flight() {
    let (_dir, agent) = start("tags", |_| {});
    let mut a = Client::connect(agent.socket());
    let mut b = Client::connect(agent.socket());
    a.request("LOCK object_name=t1");
    a.request("LOCK object_name=t2");
    b.send("LOCK object_name=t1;pid=1;tag=1");
    b.send("LOCK object_name=t2;pid=2;tag=2");
    b.assert_silent_for(Duration::from_millis(100));
    a.request("UNLOCK object_name=t2");
    assert_reply(&b.recv(), "LOCKED", &[("object_name", "t2"), ("tag", "2")]);
    a.request("UNLOCK object_name=t1");
    assert_reply(&b.recv(), "LOCKED", &[("object_name", "t1"), ("tag", "1")]);
}

#[test]
fn a_trust_contract_is_refused_untrusted_by_a_young_agent_process_and_met_later() {
    let dir = TempDir::new("trust");
    let _daemon = Daemon::start(&dir.socket(), &[], &[]);
    let mut c = Client::connect(&dir.socket());
    let m = c.request("LOCK object_name=t;min_uptime=3600;tag=1");
    assert_reply(
        &m,
        "LOCKFAILED",
        &[("object_name", "t"), ("error", "untrusted"), ("tag", "1")],
    );
    let why = param(&m, "description");
    assert!(
        why.contains("uptime ") && why.contains("min_uptime=3600") && why.contains("trust 1"),
        "{why}"
    );
    assert_eq!(
        param(&c.request("LISTTICKETS"), "list"),
        "",
        "nothing queued"
    );
    let m = c.request("LOCK object_name=t;min_uptime=0;min_trust=1;tag=2");
    assert_reply(&m, "LOCKED", &[("object_name", "t"), ("tag", "2")]);
    let m = c.request("LOCK object_name=u;min_trust=2");
    assert_reply(&m, "LOCKFAILED", &[("error", "invalid")]);
    std::thread::sleep(Duration::from_millis(1_100));
    let info = c.request("INFO");
    let uptime: f64 = param(&info, "uptime").parse().unwrap();
    assert!((1.1..60.0).contains(&uptime), "uptime {uptime}");
    let trust: f64 = param(&info, "trust").parse().unwrap();
    assert!((0.0..=1.0).contains(&trust), "trust {trust}");
    let m = c.request("LOCK object_name=u;min_uptime=1");
    assert_reply(&m, "LOCKED", &[("object_name", "u")]);
}
